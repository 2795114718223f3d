// The webhook-fanout section: N events fanned out through the real pipeline (emitEvent's
// outbox + NOTIFY → OutboxDispatcher → one webhookDeliveryWorkflow per delivery → the
// attempt activity's signed HTTPS POST) to a local HTTPS receiver, against plain HTTPS
// POSTs from Node to the same receiver in the same run. The measurement itself lives in
// webhook-fanout-child.ts; this file runs it in a child process (see below) and relays
// its log and its Result.
//
// Settings (besides BENCH_ROUNDS, BENCH_CONNECTIONS, BENCH_PG_URL from bench/lib):
//   BENCH_WEBHOOK_EVENTS (500)           events per measured round (one subscription: one delivery each)
//   BENCH_WEBHOOK_WARMUP_EVENTS (20)     unmeasured warm-up burst (and as many warm-up plain POSTs)
//   BENCH_WEBHOOK_PROBES (10)            events sent one at a time on an idle pipeline (unloaded latency)
//   BENCH_WEBHOOK_TIMEOUT_SECONDS (300)  limit for one phase's deliveries to arrive (and to settle); the section fails past it
//   BENCH_WEBHOOK_HISTORY_SAMPLE (25)    workflow histories read per round for the Temporal stage breakdown
//   BENCH_WEBHOOK_TLS (extra-ca)         how the sender trusts the receiver's test CA: `extra-ca`
//                                        (NODE_EXTRA_CA_CERTS in the child, the sender's `ca` setting unset,
//                                        as in production) or `ca-option` (the sender's `ca` setting, as the
//                                        test suite does; see the note below)
//   BENCH_WEBHOOK_TEMPORAL (file)        the dev server's store: `file` (SQLite file, as `npm start` runs it)
//                                        or `memory` (in-memory, as the test suite runs it)
//   BENCH_WEBHOOK_WORKER_OPTIONS ('')    JSON merged into the worker's options, for tuning experiments,
//                                        e.g. '{"maxConcurrentActivityTaskExecutions":200}'
//
// Why a child process: with the sender's `ca` setting, safePost (core/net/safe-http.ts)
// passes `ca: [...tls.rootCertificates, ca]` on every request, and with `agent: false`
// Node builds a new SecureContext from those ~145 PEMs for every connection: about 21 ms
// of CPU per delivery on the reference machine, which caps deliveries at about 45/s on
// its own. Production never sets `ca`, so by default the child is started with
// NODE_EXTRA_CA_CERTS naming the test CA (read once at process start) and the sender
// runs exactly the production code path.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestPki } from '../test/support/tls';
import type { Result } from './lib/types';

export type ChildMessage = { kind: 'log'; line: string } | { kind: 'result'; result: Result } | { kind: 'error'; message: string };

/** The files the child reads: the test PKI (JSON) and the CA alone (PEM, for NODE_EXTRA_CA_CERTS). */
export const PKI_FILE_ENV = 'BENCH_WEBHOOK_PKI_FILE';
/** The directory the child keeps its files in (removed here even when the child dies). */
export const TMP_DIR_ENV = 'BENCH_WEBHOOK_TMP_DIR';

export async function benchWebhookFanout(log: (line: string) => void = console.log): Promise<Result> {
  const tlsMode = process.env.BENCH_WEBHOOK_TLS ?? 'extra-ca';
  if (tlsMode !== 'extra-ca' && tlsMode !== 'ca-option') throw new Error(`BENCH_WEBHOOK_TLS=${tlsMode}: expected extra-ca or ca-option`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bench-webhook-'));
  try {
    const pki = createTestPki();
    const pkiFile = path.join(dir, 'pki.json');
    const caFile = path.join(dir, 'ca.pem');
    fs.writeFileSync(pkiFile, JSON.stringify(pki), { mode: 0o600 });
    fs.writeFileSync(caFile, pki.ca);
    const env: NodeJS.ProcessEnv = { ...process.env, [PKI_FILE_ENV]: pkiFile, [TMP_DIR_ENV]: dir, BENCH_WEBHOOK_TLS: tlsMode };
    // NODE_EXTRA_CA_CERTS names one file; the child only talks TLS to the receiver.
    if (tlsMode === 'extra-ca') env.NODE_EXTRA_CA_CERTS = caFile;

    const child = fork(path.join(__dirname, 'webhook-fanout-child.ts'), [], { env, execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result: Result | null = null;
    let failure: string | null = null;
    let straggler: NodeJS.Timeout | null = null;
    child.on('message', (m: ChildMessage) => {
      if (m.kind === 'log') log(m.line);
      else failure ??= m.kind === 'error' ? m.message : null;
      if (m.kind === 'result') result = m.result;
      // The child cleans up and exits after its result or error; one that hangs there is a bug, not a reason to hang the run.
      if (m.kind !== 'log' && !straggler) {
        straggler = setTimeout(() => {
          log('  the benchmark process did not exit 60 s after finishing; stopping it');
          child.kill('SIGKILL');
        }, 60_000);
        straggler.unref();
      }
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (c, signal) => resolve(c ?? (signal ? 128 : null)));
    });
    if (straggler) clearTimeout(straggler);
    if (failure) throw new Error(`webhook-fanout: ${failure}`);
    if (code !== 0) throw new Error(`webhook-fanout: the benchmark process exited with code ${code}`);
    if (!result) throw new Error('webhook-fanout: the benchmark process exited without a result');
    return result;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
