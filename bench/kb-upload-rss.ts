// The kb-upload-rss section: resident memory of an API process while it receives a
// ~200 MB knowledge-base upload (POST /api/v1/kb/files, multipart), goal: growth < 64 MB.
//
// The API runs in a child process built exactly as api/main.ts builds one
// (createApiServer from a Config read from the environment: its own key cache, dense
// index, PostgreSQL rate-limit store, pino at LOG_LEVEL=warn), started with --expose-gc so
// its idle baseline can be taken after a full collection. This process is the client: it
// streams the multipart body, generated on the fly (a CSV export, never held in memory
// whole), with a Content-Length, as `curl -F` would, so the client's own memory is not in
// the figure. While the body streams, this process reads the server's VmRSS from
// /proc/<pid>/status every 50 ms; the kernel's high-water mark (VmHWM, reset through
// /proc/<pid>/clear_refs just before) catches a peak between samples. The server also
// samples its own process.memoryUsage() every 50 ms, which says where growth sits (V8
// heap, Buffers). A small upload first warms the path up; the big file is then deleted
// through the API (its blob must be gone) and everything is removed.
//
// Settings (besides BENCH_PG_URL from bench/lib):
//   BENCH_KB_UPLOAD_BYTES (200000000)  size of the uploaded file; the API's limit is
//                                      KB_UPLOAD_MAX_BYTES (200 MiB = 209715200 bytes)
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { startApi } from '../api/server';
import { compose } from '../core/compose';
import { loadConfig, rateLimitStoreKind } from '../core/config';
import { childMain, runInChild, type Cleanup } from './lib/child';
import { envNumber } from './lib/load';
import { prng } from './lib/prose';
import { BENCH_KEY, benchCompose, createKey, listen, setUpBench } from './lib/setup';
import type { Check, Result } from './lib/types';

const GOAL_MB = 64;
const SAMPLE_MS = 50;
const WARMUP_BYTES = 4 * 1024 * 1024;
const ROLE_ENV = 'BENCH_KB_UPLOAD_ROLE';

const MiB = 1024 * 1024;
const toMb = (bytes: number) => bytes / MiB;

type Usage = ReturnType<typeof process.memoryUsage>;
type ServerMessage = { kind: 'ready'; url: string } | { kind: 'baseline'; usage: Usage } | { kind: 'peaks'; peak: Usage; samples: number } | { kind: 'error'; message: string };
type ClientMessage = { kind: 'baseline' } | { kind: 'peaks' } | { kind: 'stop' };

// ---------------------------------------------------------------------------------------
// The server (child process)

async function serve(): Promise<void> {
  const send = (m: ServerMessage) => process.send?.(m);
  // As api/main.ts builds the API process.
  const config = loadConfig();
  const server = await compose(config, { role: 'api', databaseUrl: config.DATABASE_URL!, embedded: false });
  const { app } = await startApi(server, { rateStore: rateLimitStoreKind(config, 'postgres') });
  const url = await listen(app);

  const fields = ['rss', 'heapTotal', 'heapUsed', 'external', 'arrayBuffers'] as const;
  let peak = process.memoryUsage();
  let samples = 0;
  const sampler = setInterval(() => {
    const u = process.memoryUsage();
    samples++;
    for (const f of fields) peak[f] = Math.max(peak[f], u[f]);
  }, SAMPLE_MS);

  process.on('message', (m: ClientMessage) => {
    void (async () => {
      if (m.kind === 'baseline') {
        const gc = (globalThis as { gc?: () => void }).gc;
        for (let i = 0; i < 3; i++) {
          gc?.();
          await new Promise((r) => setTimeout(r, 100));
        }
        peak = process.memoryUsage();
        samples = 0;
        send({ kind: 'baseline', usage: peak });
      } else if (m.kind === 'peaks') {
        send({ kind: 'peaks', peak, samples });
      } else if (m.kind === 'stop') {
        clearInterval(sampler);
        await server.close();
        process.disconnect();
      }
    })().catch((err: unknown) => send({ kind: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) }));
  });
  // The parent gone (Ctrl-C): close down rather than linger.
  process.once('disconnect', () => {
    clearInterval(sampler);
    void server.close().finally(() => process.exit(0));
  });
  send({ kind: 'ready', url });
}

// ---------------------------------------------------------------------------------------
// The client (the bench process)

/** A CSV order export of exactly `bytes` bytes, produced 64 KB at a time from a pool of pre-built blocks. */
function csvStream(bytes: number): Readable {
  const rand = prng(2024);
  const statuses = ['delivered', 'shipped', 'refunded', 'processing', 'cancelled', 'returned'];
  const products = ['wireless headphones', 'standing desk', 'espresso machine', 'hiking backpack', 'winter jacket', 'gift card', 'yoga mat'];
  const block = (b: number) => {
    const lines: string[] = [];
    let size = 0;
    let i = 0;
    while (size < 64 * 1024) {
      const line =
        `${100000 + b * 1000 + i},2026-${String(1 + Math.floor(rand() * 12)).padStart(2, '0')}-${String(1 + Math.floor(rand() * 28)).padStart(2, '0')},` +
        `customer${Math.floor(rand() * 1e6)}@example.com,${products[Math.floor(rand() * products.length)]},${statuses[Math.floor(rand() * statuses.length)]},` +
        `${(rand() * 500).toFixed(2)},"Customer asked about delivery times and the returns window for order ${b}-${i}"\n`;
      lines.push(line);
      size += line.length;
      i++;
    }
    return Buffer.from(lines.join(''));
  };
  const header = Buffer.from('order_id,date,customer,product,status,amount_eur,notes\n');
  const pool = Array.from({ length: 64 }, (_, b) => block(b));
  let sent = 0;
  let n = 0;
  return new Readable({
    read() {
      if (sent >= bytes) return void this.push(null);
      const next = sent === 0 ? header : pool[n++ % pool.length];
      const take = Math.min(next.length, bytes - sent);
      sent += take;
      this.push(take === next.length ? next : next.subarray(0, take));
    },
  });
}

interface UploadOutcome {
  status: number;
  body: { id?: string; file_size?: number; mime_type?: string; status?: string; error?: string; message?: string };
  seconds: number;
}

/** A multipart/form-data POST whose file part streams `bytes` bytes of CSV. */
async function upload(url: string, key: string, name: string, bytes: number): Promise<UploadOutcome> {
  const boundary = `----concierge-bench-${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: text/csv\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const started = performance.now();
  const req = http.request(`${url}/api/v1/kb/files`, {
    method: 'POST',
    agent: false,
    headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + bytes + tail.length) },
  });
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    req.once('response', resolve);
    req.once('error', reject);
  });
  async function* body() {
    yield head;
    for await (const chunk of csvStream(bytes)) yield chunk as Buffer;
    yield tail;
  }
  // A server that answers early (an error) stops reading; the pipeline's failure then matters less than its answer.
  const sending = pipeline(Readable.from(body(), { objectMode: false }), req).catch((err: unknown) => err);
  const res = await response;
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const sendError = await sending;
  const text = Buffer.concat(chunks).toString('utf8');
  let parsed: UploadOutcome['body'] = {};
  try {
    parsed = JSON.parse(text) as UploadOutcome['body'];
  } catch {
    parsed = { message: text.slice(0, 300) };
  }
  if (sendError && res.statusCode === 201) throw sendError;
  return { status: res.statusCode ?? 0, body: parsed, seconds: (performance.now() - started) / 1000 };
}

async function request(method: string, url: string, key: string): Promise<number> {
  const res = await fetch(url, { method, headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

/** VmRSS and VmHWM of a process, in bytes (Linux), or null. */
function procMemory(pid: number): { rss: number; hwm: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return null;
  }
}

/** Resets the kernel's peak-RSS mark of a process (Linux >= 4.0); false when not allowed. */
function resetPeak(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

class ServerProcess {
  private readonly waiting: Array<{ kind: ServerMessage['kind']; resolve: (m: ServerMessage) => void }> = [];
  private failure: Error | null = null;
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    child.on('message', (m: ServerMessage) => {
      if (m.kind === 'error') this.failure = new Error(`the API process: ${m.message}`);
      const i = this.waiting.findIndex((w) => w.kind === m.kind);
      if (i >= 0) this.waiting.splice(i, 1)[0].resolve(m);
    });
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Sends `m` (if any) and waits for the next message of `kind` (or the process's exit, which is an error). */
  async ask<K extends ServerMessage['kind']>(kind: K, m?: ClientMessage, timeoutMs = 60_000): Promise<Extract<ServerMessage, { kind: K }>> {
    const reply = new Promise<ServerMessage>((resolve) => this.waiting.push({ kind, resolve }));
    if (m) this.child.send(m);
    let timer: NodeJS.Timeout | undefined;
    const res = await Promise.race([
      reply,
      this.exited.then((code) => {
        throw this.failure ?? new Error(`the API process exited (code ${code}) while waiting for '${kind}'`);
      }),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`the API process did not answer '${kind}' within ${timeoutMs / 1000} s`)), timeoutMs))),
    ]).finally(() => clearTimeout(timer));
    if (this.failure) throw this.failure;
    return res as Extract<ServerMessage, { kind: K }>;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    try {
      if (this.child.connected) this.child.send({ kind: 'stop' } satisfies ClientMessage);
      else this.child.kill('SIGTERM');
      await this.exited;
    } finally {
      clearTimeout(kill);
    }
  }
}

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const bytes = Math.round(envNumber('BENCH_KB_UPLOAD_BYTES', 200_000_000, 1024));
  const bench = await setUpBench(cleanup);
  const tmp = bench.dir;
  const db = bench.db;
  const key = (await createKey((await benchCompose(bench, 'cli')).services, bench.workspaceId, ['kb:read', 'kb:write'])).key;

  // ---- The API process.
  const storage = path.join(tmp, 'api-blobs');
  const child = fork(__filename, [], {
    env: {
      ...process.env,
      [ROLE_ENV]: 'server',
      NODE_ENV: 'production',
      DATABASE_URL: db.url,
      CONCIERGE_ENCRYPTION_KEY: BENCH_KEY,
      CONCIERGE_DATA_DIR: path.join(tmp, 'data'),
      CONCIERGE_STORAGE_DIR: storage,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_STORE: 'postgres',
    },
    execArgv: [...process.execArgv, '--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const server = new ServerProcess(child);
  cleanup.push(['API process', () => server.stop()]);
  const { url } = await server.ask('ready');
  const limit = loadConfig(process.env).KB_UPLOAD_MAX_BYTES;
  if (bytes > limit) throw new Error(`BENCH_KB_UPLOAD_BYTES=${bytes} is over the API's upload limit (${limit} bytes)`);

  // ---- Warm-up: a small upload and its delete, through the same path.
  const warm = await upload(url, key, 'warm-up.csv', WARMUP_BYTES);
  if (warm.status !== 201 || !warm.body.id) throw new Error(`warm-up upload answered ${warm.status}: ${JSON.stringify(warm.body)}`);
  if ((await request('DELETE', `${url}/api/v1/kb/files/${warm.body.id}`, key)) !== 204) throw new Error('warm-up delete failed');

  // ---- Baseline after a full collection, then the big upload with the server's RSS sampled.
  const baseline = (await server.ask('baseline', { kind: 'baseline' })).usage;
  await new Promise((r) => setTimeout(r, 300));
  const hwmReset = resetPeak(server.pid);
  const before = procMemory(server.pid);
  const baselineRss = before?.rss ?? baseline.rss;
  const samples: Array<{ t: number; rss: number }> = [];
  const started = performance.now();
  const sampler = setInterval(() => {
    const m = procMemory(server.pid);
    if (m) samples.push({ t: (performance.now() - started) / 1000, rss: m.rss });
  }, SAMPLE_MS);
  let outcome: UploadOutcome;
  try {
    outcome = await upload(url, key, 'orders-export.csv', bytes);
  } finally {
    clearInterval(sampler);
  }
  const after = procMemory(server.pid);
  const inProcess = await server.ask('peaks', { kind: 'peaks' });
  if (outcome.status !== 201 || !outcome.body.id) throw new Error(`the upload answered ${outcome.status}: ${JSON.stringify(outcome.body)}`);
  if (outcome.body.file_size !== bytes) throw new Error(`the API recorded ${outcome.body.file_size} bytes, sent ${bytes}`);
  if (outcome.body.mime_type !== 'text/csv') throw new Error(`the upload sniffed as ${outcome.body.mime_type}, expected text/csv`);

  // ---- The stored blob has every byte; deleting the file removes it.
  const stored: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(dir, e.name));
      else stored.push(path.join(dir, e.name));
    }
  };
  walk(path.join(storage, 'blobs'));
  if (stored.length !== 1 || fs.statSync(stored[0]).size !== bytes) throw new Error(`expected one stored blob of ${bytes} bytes, found ${stored.map((f) => fs.statSync(f).size).join(', ') || 'none'}`);
  const deleted = await request('DELETE', `${url}/api/v1/kb/files/${outcome.body.id}`, key);
  if (deleted !== 204 || fs.existsSync(stored[0])) throw new Error(`deleting the uploaded file answered ${deleted}; blob ${fs.existsSync(stored[0]) ? 'still there' : 'gone'}`);
  if (fs.readdirSync(path.join(storage, 'tmp')).length) throw new Error('staging files left behind in the blob store');

  const sampledPeak = Math.max(baselineRss, ...samples.map((x) => x.rss));
  const peakRss = Math.max(sampledPeak, hwmReset && after ? after.hwm : 0);
  const growth = peakRss - baselineRss;
  const over = (f: keyof Usage) => toMb(inProcess.peak[f] - baseline[f]);
  const check: Check = { name: 'kb-upload-rss growth', value: toMb(growth), unit: 'MB', goal: `< ${GOAL_MB}`, pass: toMb(growth) < GOAL_MB };
  const headline =
    `kb-upload-rss: ${(bytes / 1e6).toFixed(0)} MB streamed in ${outcome.seconds.toFixed(1)} s (${(bytes / 1e6 / outcome.seconds).toFixed(0)} MB/s), ` +
    `RSS ${toMb(baselineRss).toFixed(0)} -> peak ${toMb(peakRss).toFixed(0)} MB = +${toMb(growth).toFixed(1)} MB (goal < ${GOAL_MB} MB) ${check.pass ? 'ok' : 'MISSED'}`;
  log(`  ${headline}`);
  log(
    `    peak from ${samples.length} samples every ${SAMPLE_MS} ms: ${toMb(sampledPeak).toFixed(0)} MB; kernel high-water mark: ${hwmReset && after ? `${toMb(after.hwm).toFixed(0)} MB` : 'unavailable'}; ` +
      `RSS after the upload ${after ? toMb(after.rss).toFixed(0) : '-'} MB`,
  );
  log(
    `    in-process peaks over the baseline (${inProcess.samples} samples): rss +${over('rss').toFixed(1)}, heapTotal +${over('heapTotal').toFixed(1)}, ` +
      `heapUsed +${over('heapUsed').toFixed(1)}, external +${over('external').toFixed(1)}, arrayBuffers +${over('arrayBuffers').toFixed(1)} MB`,
  );
  log(`    verified: 201 text/csv with file_size ${bytes}; one blob of ${bytes} bytes stored, removed by DELETE (204); no staging files left`);

  const mbOf = (u: Usage) => Object.fromEntries(Object.entries(u).map(([k, v]) => [k, Math.round(toMb(v) * 10) / 10]));
  return {
    section: 'kb-upload-rss',
    description: `RSS growth of an API process (api/server.ts createApiServer, as api/main.ts runs it) while it receives one ${(bytes / 1e6).toFixed(0)} MB multipart upload streamed from another process`,
    settings: { bytes, sampleMs: SAMPLE_MS, warmupBytes: WARMUP_BYTES, goalMb: GOAL_MB, rateStore: 'postgres', apiUploadLimitBytes: limit },
    runs: [],
    targets: [],
    comparisons: [],
    checks: [check],
    headlines: [headline],
    details: {
      uploadSeconds: outcome.seconds,
      megabytesPerSecond: bytes / 1e6 / outcome.seconds,
      baselineRssMb: toMb(baselineRss),
      peakRssMb: toMb(peakRss),
      sampledPeakRssMb: toMb(sampledPeak),
      kernelHighWaterMarkMb: hwmReset && after ? toMb(after.hwm) : null,
      growthMb: toMb(growth),
      inProcessBaselineMb: mbOf(baseline),
      inProcessPeakMb: mbOf(inProcess.peak),
      rssTimeline: samples.filter((_, i) => i % Math.max(1, Math.floor(samples.length / 40)) === 0).map((x) => [Math.round(x.t * 100) / 100, Math.round(toMb(x.rss))]),
    },
  };
}

export function benchKbUploadRss(log: (line: string) => void = console.log): Promise<Result> {
  return runInChild(__filename, 'kb-upload-rss', log);
}

if (require.main === module && process.env[ROLE_ENV] !== 'server') childMain(measure);
if (require.main === module && process.env[ROLE_ENV] === 'server') {
  serve().catch((err: unknown) => {
    process.send?.({ kind: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) } satisfies ServerMessage);
    process.exitCode = 1;
    if (process.connected) process.disconnect();
  });
}
