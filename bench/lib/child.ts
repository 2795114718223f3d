import { fork } from 'node:child_process';
import type { Result } from './types';

/**
 * Each section runs in a child process of its own (its memory, the model's arena and the
 * Temporal Runtime go with it): the section's file calls `childMain(measure)` when it is
 * the main module, and its exported function `runInChild(__filename, ...)`.
 */

export type ChildMessage = { kind: 'log'; line: string } | { kind: 'result'; result: Result } | { kind: 'error'; message: string };

/** Cleanup steps [name, step], run in reverse order whatever happens. */
export type Cleanup = Array<[string, () => Promise<void>]>;

const send = (m: ChildMessage) => (process.send ? process.send(m) : console.log(m.kind === 'log' ? m.line : m.kind === 'error' ? m.message : JSON.stringify(m.result, null, 2)));

/** In the child: runs the measurement, reports its result or error, always cleans up, then lets the process end. */
export function childMain(measure: (log: (line: string) => void, cleanup: Cleanup) => Promise<Result>): void {
  const log = (line: string) => send({ kind: 'log', line });
  const cleanup: Cleanup = [];
  let cleaned: Promise<void> | null = null;
  const cleanUp = () =>
    (cleaned ??= (async () => {
      for (const [name, fn] of cleanup.reverse()) {
        await fn().catch((err: unknown) => log(`  cleanup of ${name} failed: ${err instanceof Error ? err.message : String(err)}`));
      }
    })());
  const fail = (err: unknown) => send({ kind: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  // An error thrown outside the run's promise chain still cleans up.
  process.once('uncaughtException', (err) => {
    fail(err);
    void cleanUp().finally(() => process.exit(1));
  });
  // The parent going away (Ctrl-C on `npm run bench`) must not leave servers and databases behind.
  process.once('disconnect', () => void cleanUp().finally(() => process.exit(1)));
  void (async () => {
    try {
      send({ kind: 'result', result: await measure(log, cleanup) });
    } catch (err) {
      fail(err);
      process.exitCode = 1;
    } finally {
      await cleanUp();
      process.removeAllListeners('disconnect');
      if (process.connected) process.disconnect();
    }
  })();
}

/** In the parent: forks `file` (with this process's --import tsx), relays its log and returns its Result. */
export async function runInChild(file: string, name: string, log: (line: string) => void, env: NodeJS.ProcessEnv = {}): Promise<Result> {
  const child = fork(file, [], { env: { ...process.env, ...env }, execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let result: Result | null = null;
  let failure: string | null = null;
  let straggler: NodeJS.Timeout | null = null;
  child.on('message', (m: ChildMessage) => {
    if (m.kind === 'log') return log(m.line);
    if (m.kind === 'result') result = m.result;
    else failure ??= m.message;
    // The child cleans up and exits after its result or error; one that hangs there is a bug, not a reason to hang the run.
    straggler ??= setTimeout(() => {
      log(`  the ${name} process did not exit 120 s after finishing; stopping it`);
      child.kill('SIGKILL');
    }, 120_000).unref();
  });
  const code = await new Promise<number | null>((resolve, reject) => child.once('error', reject).once('exit', (c, signal) => resolve(c ?? (signal ? 128 : null))));
  if (straggler) clearTimeout(straggler);
  if (failure) throw new Error(`${name}: ${failure}`);
  if (code !== 0) throw new Error(`${name}: the benchmark process exited with code ${code}`);
  if (!result) throw new Error(`${name}: the benchmark process exited without a result`);
  return result;
}
