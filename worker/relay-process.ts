import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { metricsJson } from '../app/metrics';
import type { RelayMetricsRequest, RelayReport, RelayStart } from './relay-main';

type Metrics = Awaited<ReturnType<typeof metricsJson>>;
/** How long a scrape waits for the relay's metrics (then it is served without them). */
const METRICS_TIMEOUT_MS = 2_000;

/** How long the relay process may take to compose and subscribe. */
const READY_TIMEOUT_MS = 60_000;
/** How long a stopping relay may take to finish its deliveries in flight before it is killed. */
const STOP_GRACE_MS = 10_000;
/** A relay that died is started again after this, doubling up to a minute while it keeps dying at once. */
const RESTART_MIN_MS = 1_000;
const RESTART_MAX_MS = 60_000;

export interface RelayProcess {
  pid: () => number | undefined;
  /** The relay's metrics (empty when it does not answer in time, or does not run). */
  metrics(): Promise<Metrics>;
  stop(): Promise<void>;
}

/**
 * `npm start`'s second process: the outbox relay (worker/relay-main.ts), forked with this process's configuration,
 * so webhook deliveries and hand-offs run on the other core while this process serves the API and runs the worker.
 * Resolves once it is subscribed; a relay that exits is started again (the outbox keeps what it had not relayed,
 * and the next relay claims it); `stop()` ends it gracefully, killing it after a grace period.
 */
export async function startRelayProcess(
  start: Omit<RelayStart, 'kind'>,
  log: { info(msg: string): void; error(msg: string): void } = { info: (m) => console.log(m), error: (m) => console.error(m) },
): Promise<RelayProcess> {
  const ext = path.extname(__filename);
  const script = path.join(__dirname, `relay-main${ext}`);
  let child: ChildProcess | null = null;
  let stopping = false;
  let restartTimer: NodeJS.Timeout | undefined;
  let delay = RESTART_MIN_MS;
  let nextReq = 0;
  const waiting = new Map<number, (m: Metrics) => void>();

  const spawn = () =>
    new Promise<void>((resolve, reject) => {
      const c = fork(script, [], {
        cwd: path.resolve(__dirname, '..'),
        // From source (npm start), the child loads TypeScript as its parent does; compiled, it runs the .js beside this file.
        // A profiled parent (node --cpu-prof …) has its relay profiled too.
        execArgv: [...(ext === '.ts' ? ['--import', 'tsx'] : []), ...process.execArgv.filter((a) => /^--(cpu|heap)-prof/.test(a))],
        env: { ...process.env, CONCIERGE_RELAY_FORKED: '1' },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      child = c;
      const timer = setTimeout(() => {
        c.kill('SIGKILL');
        reject(new Error(`the outbox relay process did not start within ${READY_TIMEOUT_MS / 1000} s`));
      }, READY_TIMEOUT_MS);
      let ready = false;
      let readyAt = 0;
      c.on('message', (m: RelayReport) => {
        // Asked once it listens (a message sent while it still loads its modules could be lost).
        if (m.kind === 'hello') c.send({ kind: 'start', ...start } satisfies RelayStart);
        else if (m.kind === 'metrics') {
          waiting.get(m.req)?.(m.metrics);
          waiting.delete(m.req);
        } else if (m.kind === 'ready') {
          ready = true;
          readyAt = Date.now();
          clearTimeout(timer);
          resolve();
        } else if (m.kind === 'failed') {
          clearTimeout(timer);
          reject(new Error(`the outbox relay process failed to start: ${m.message}`));
        }
      });
      c.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!ready) return reject(new Error(`the outbox relay process exited (${signal ?? code}) before it was ready`));
        if (stopping) return;
        // A relay that ran a while before dying starts again at once; one that keeps dying waits longer each time.
        if (Date.now() - readyAt > RESTART_MAX_MS) delay = RESTART_MIN_MS;
        log.error(`[concierge] outbox relay process exited (${signal ?? code}); starting it again in ${delay / 1000} s`);
        scheduleRestart();
      });
    });

  const scheduleRestart = () => {
    if (stopping) return;
    const wait = delay;
    delay = Math.min(delay * 2, RESTART_MAX_MS);
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      spawn().then(
        () => log.info(`[concierge] outbox relay process running again (pid ${child?.pid})`),
        (err: unknown) => {
          log.error(`[concierge] ${(err as Error).message}`);
          scheduleRestart();
        },
      );
    }, wait);
  };

  await spawn();
  return {
    pid: () => child?.pid,
    metrics() {
      const c = child;
      if (!c?.connected) return Promise.resolve([]);
      const req = nextReq++;
      return new Promise<Metrics>((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(req);
          resolve([]);
        }, METRICS_TIMEOUT_MS);
        waiting.set(req, (m) => {
          clearTimeout(timer);
          resolve(m);
        });
        c.send({ kind: 'metrics', req } satisfies RelayMetricsRequest);
      });
    },
    async stop() {
      stopping = true;
      clearTimeout(restartTimer);
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      const kill = setTimeout(() => c.kill('SIGKILL'), STOP_GRACE_MS);
      c.kill('SIGTERM');
      await exited.finally(() => clearTimeout(kill));
    },
  };
}

