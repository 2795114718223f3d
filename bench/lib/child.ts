import { fork } from 'node:child_process';
import type { Result } from './types';

// Each section runs in a child process of its own (its memory, the model's arena and the Temporal Runtime go with it).

export type ChildMessage = { kind: 'log'; line: string } | { kind: 'result'; result: Result } | { kind: 'error'; message: string };

/** Cleanup steps [name, step], run in reverse order whatever happens. */
export type Cleanup = Array<[string, () => Promise<void>]>;

const send = (m: ChildMessage) => (process.send ? process.send(m) : console.log(m.kind === 'log' ? m.line : m.kind === 'error' ? m.message : JSON.stringify(m.result, null, 2)));

const errorText = (err: unknown) => (err instanceof Error ? (err.stack ?? err.message) : String(err));
const forkSelf = (file: string, env: NodeJS.ProcessEnv, execArgv: string[] = []) =>
  fork(file, [], { env: { ...process.env, ...env }, execArgv: [...process.execArgv, ...execArgv], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });

export type Measure = (log: (line: string) => void, cleanup: Cleanup) => Promise<Result>;

/** In the child: runs the measurement, logs its headlines, reports its result or error, always cleans up, then lets the process end. */
function childMain(measure: Measure): void {
  const log = (line: string) => send({ kind: 'log', line });
  const cleanup: Cleanup = [];
  let cleaned: Promise<void> | null = null;
  const cleanUp = () =>
    (cleaned ??= (async () => {
      for (const [name, fn] of cleanup.reverse()) {
        await fn().catch((err: unknown) => log(`  cleanup of ${name} failed: ${err instanceof Error ? err.message : String(err)}`));
      }
    })());
  const fail = (err: unknown) => send({ kind: 'error', message: errorText(err) });
  // An error thrown outside the run's promise chain still cleans up.
  process.once('uncaughtException', (err) => {
    fail(err);
    void cleanUp().finally(() => process.exit(1));
  });
  // The parent going away (Ctrl-C on `npm run bench`) must not leave servers and databases behind.
  process.once('disconnect', () => void cleanUp().finally(() => process.exit(1)));
  void (async () => {
    try {
      const result = await measure(log, cleanup);
      for (const h of result.headlines ?? []) log(`  ${h}`);
      send({ kind: 'result', result });
    } catch (err) {
      fail(err);
      process.exitCode = 1;
    } finally {
      await cleanUp();
      process.removeAllListeners('disconnect');
      // Whatever the cleanup left open (a model's thread, a socket) is named, and the process ends anyway: the parent
      // waits for this process's exit, and a straggler would cost the run two minutes and then fail it.
      setTimeout(() => {
        process.stderr.write(`[bench] left open after the cleanup: ${process.getActiveResourcesInfo().join(', ') || 'nothing'}; exiting\n`);
        process.exit();
      }, 5_000).unref();
      if (process.connected) process.disconnect();
    }
  })();
}

/** `benchX = section(module, 'x', measure)`: run as main module the file measures (or, with BENCH_ROLE, plays that helper role); the returned function runs it in a child. */
export function section(mod: NodeModule, name: string, measure: Measure, opts: { env?: NodeJS.ProcessEnv; roles?: Record<string, () => void> } = {}) {
  if (require.main === mod) {
    const role = process.env.BENCH_ROLE;
    if (role) opts.roles![role]();
    else childMain(measure);
  }
  return (log: (line: string) => void = console.log, run: { name?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Result> =>
    runInChild(mod.filename, run.name ?? name, log, { ...opts.env, ...run.env });
}

type RoleMessage = { kind: 'ready'; ready: unknown } | { kind: 'done'; req: number; result: unknown } | { kind: 'failed'; req: number; message: string };

/** A helper process (the section's file, BENCH_ROLE=`role`, serveRole): its `ready` value and `call`. Cleanup disconnects it, killing it after 15 s. */
export async function forkRole<Req, Res, Ready = undefined>(file: string, role: string, cleanup: Cleanup, env: NodeJS.ProcessEnv = {}, execArgv: string[] = []) {
  const child = forkSelf(file, { ...env, BENCH_ROLE: role }, execArgv);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  cleanup.push([
    `${role} process`,
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
      if (child.connected) child.disconnect();
      else child.kill('SIGTERM');
      await exited.finally(() => clearTimeout(kill));
    },
  ]);
  const waiting = new Map<number, { resolve: (r: Res) => void; reject: (e: Error) => void }>();
  let next = 0;
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.on('message', (m: RoleMessage) => {
      if (m.kind === 'ready') return resolve(m.ready as Ready);
      const w = waiting.get(m.req);
      waiting.delete(m.req);
      if (m.kind === 'done') w?.resolve(m.result as Res);
      else w?.reject(new Error(`${role}: ${m.message}`));
    });
    void exited.then((code) => {
      reject(new Error(`the ${role} process exited (${code}) before it was ready`));
      for (const w of waiting.values()) w.reject(new Error(`the ${role} process exited (${code})`));
    });
  });
  const call = (body: Req) =>
    new Promise<Res>((resolve, reject) => {
      const req = next++;
      waiting.set(req, { resolve, reject });
      child.send({ req, body });
    });
  return { ready, pid: child.pid!, call };
}

/** In a helper process: set up, report `ready`, answer each request with `handle`; `stop` when the parent goes. */
export function serveRole<Req, Res>(setUp: () => Promise<{ ready?: unknown; handle: (r: Req) => Promise<Res>; stop?: () => Promise<void> }>): void {
  const send = (m: RoleMessage) => process.send!(m);
  setUp().then(
    ({ ready, handle, stop }) => {
      process.on('message', (m: { req: number; body: Req }) =>
        void handle(m.body).then((result) => send({ kind: 'done', req: m.req, result }), (err: unknown) => send({ kind: 'failed', req: m.req, message: errorText(err) })),
      );
      process.once('disconnect', () => void (stop?.() ?? Promise.resolve()).finally(() => process.exit(0)));
      send({ kind: 'ready', ready });
    },
    (err: unknown) => {
      console.error(errorText(err));
      process.exit(1);
    },
  );
}

/** In the parent: forks `file` (with this process's --import tsx), relays its log and returns its Result. */
async function runInChild(file: string, name: string, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<Result> {
  const child = forkSelf(file, env);
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
