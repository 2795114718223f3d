/**
 * Starting a process from a worker thread. On Linux `child_process.spawn` forks the calling process (its page
 * tables copied): from a voice worker of a gigabyte and more that held the calling thread 30-60 ms per start (a
 * voice session's CPU profile, the recorder's ffmpeg), and on the main thread that stalls the 20 ms pacing of every
 * live call's audio. Here the spawn, the pipes and the wait run in one thread per process (SPAWN_THREAD), started at
 * the first command; the main thread only posts the command and reads the answer.
 *
 * The thread is referenced while a command runs (a script awaiting one stays alive) and unreferenced when idle (it
 * never holds a process open: Jest sees no open handle after a test). `closeSpawnThread()` ends it, killing what still
 * runs; a later command starts another.
 */
import { KILL_ALL_THEN_EXIT_SOURCE, RequestThread } from './request-thread';

/** The thread's code: plain JS, so it runs under tsx, Jest and a build alike. */
const SPAWN_THREAD = String.raw`
const { parentPort } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const children = new Map();
${KILL_ALL_THEN_EXIT_SOURCE}
// Set by shutdown: the commands still running are killed and answer nothing (the thread's exit answers them).
let closing = false;

function start(m) {
  let child;
  let answered = false;
  const answer = (a, transfer) => {
    if (answered || closing) return;
    answered = true;
    children.delete(m.id);
    parentPort.postMessage({ id: m.id, ...a }, transfer);
  };
  try {
    child = spawn(m.cmd, m.args, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    return answer({ error: { code: err && err.code, message: String((err && err.message) || err) } });
  }
  const entry = { child, closed: false };
  children.set(m.id, entry);
  const chunks = [];
  let bytes = 0;
  let overflow = false;
  let stderr = '';
  child.stdout.on('data', (c) => {
    if (overflow) return;
    bytes += c.length;
    if (m.maxStdoutBytes !== undefined && bytes > m.maxStdoutBytes) {
      overflow = true;
      chunks.length = 0;
      child.kill('SIGKILL');
      return;
    }
    chunks.push(c);
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-m.stderrTail)));
  // The first of 'error' (it did not start, or could not be killed) and 'close' answers, as a spawn on the main thread would.
  child.on('error', (err) => answer({ error: { code: err.code, message: err.message } }));
  child.on('close', (code, signal) => {
    entry.closed = true;
    entry.onClose?.();
    if (overflow) return answer({ code, signal, overflow: true, stdout: new Uint8Array(0), stderr });
    // A buffer of its own (not Buffer's shared pool), aligned at 0, handed over without a copy.
    const stdout = new Uint8Array(bytes);
    let at = 0;
    for (const c of chunks) {
      stdout.set(c, at);
      at += c.length;
    }
    answer({ code, signal, overflow: false, stdout, stderr }, [stdout.buffer]);
  });
}

parentPort.on('message', (m) => {
  if (m.shutdown) {
    closing = true;
    return killAllThenExit([...children.values()]);
  }
  if (m.kill !== undefined) {
    children.get(m.kill)?.child.kill('SIGKILL');
    return;
  }
  start(m);
});
`;

export interface CommandOptions {
  /** The last this many characters of stderr are kept (default 4000). */
  stderrTail?: number;
  /** More stdout than this kills the command (SIGKILL) and answers `overflow: true` with no stdout. */
  maxStdoutBytes?: number;
  /** Aborting kills the command (SIGKILL); its answer then comes as for any killed process. */
  signal?: AbortSignal;
}

/** How a command ended: it ran (`code` or `signal`), or it did not start (`error`, e.g. `ENOENT`). */
export type CommandResult =
  | { started: true; code: number | null; signal: NodeJS.Signals | null; overflow: boolean; stdout: Buffer; stderr: string }
  | { started: false; error: { code?: string; message: string } };

type ThreadAnswer = { id: number } & (
  | { code: number | null; signal: NodeJS.Signals | null; overflow: boolean; stdout: Uint8Array; stderr: string }
  | { error: { code?: string; message: string } }
);

/** The process's one spawn thread. */
const thread = new RequestThread<ThreadAnswer>({ source: SPAWN_THREAD, refWhileBusy: true, lost: (id, why) => ({ id, error: { message: `the spawn thread ${why}` } }) });

/**
 * Runs `cmd` with `args` (no shell; stdin ignored) from the process's spawn thread and answers how it ended, with its
 * whole stdout and the tail of its stderr. Never rejects: a command that does not start answers `started: false`.
 */
export async function runCommand(cmd: string, args: readonly string[], opts: CommandOptions = {}): Promise<CommandResult> {
  const { signal } = opts;
  const { id, answer } = thread.request({ cmd, args: [...args], stderrTail: opts.stderrTail ?? 4000, maxStdoutBytes: opts.maxStdoutBytes });
  const onAbort = () => thread.post({ kill: id });
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  const a = await answer;
  signal?.removeEventListener('abort', onAbort);
  if ('error' in a) return { started: false, error: a.error };
  return { started: true, code: a.code, signal: a.signal, overflow: a.overflow, stdout: Buffer.from(a.stdout.buffer, a.stdout.byteOffset, a.stdout.byteLength), stderr: a.stderr };
}

/** Ends the process's spawn thread, killing the commands still running (their callers hear `started: false`). */
export function closeSpawnThread(): Promise<void> {
  return thread.close();
}
