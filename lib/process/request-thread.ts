import { Worker } from 'node:worker_threads';

/**
 * A request thread's shutdown, as plain JS for its source: defines `killAllThenExit(entries)`, `entries` the child
 * processes it started (`{ child, closed, onClose }`, `closed` set and `onClose` called on the child's 'close'): each
 * still running is killed and reaped (no zombie left under the process), then the thread ends.
 */
export const KILL_ALL_THEN_EXIT_SOURCE = String.raw`
function killAllThenExit(entries) {
  const running = entries.filter((e) => !e.closed);
  let left = running.length;
  if (!left) process.exit(0);
  for (const e of running) {
    e.onClose = () => --left || process.exit(0);
    e.child.kill('SIGKILL');
  }
}
`;

/**
 * A worker thread that answers numbered requests (`{ id, ... }` in, `{ id, ... }` out), the shape the process's
 * service threads share (the spawn thread, the espeak thread): one per process, started at its first request, never
 * holding the process open when idle (unreferenced after its listeners: adding one references a Worker again). With
 * `refWhileBusy` it is referenced while a request waits, so a script awaiting only that request stays alive. A thread
 * that dies or is closed answers every waiting request with `lost(id, why)`; the next request starts a new one.
 */
export class RequestThread<A extends { id: number }> {
  private worker: Worker | null = null;
  private readonly waiting = new Map<number, (a: A) => void>();
  private next = 0;

  constructor(
    private readonly o: {
      /** The thread's plain-JS source (run with `eval: true`). */
      source: string;
      workerData?: () => unknown;
      refWhileBusy: boolean;
      /** The answer a request gets when the thread is gone (`why`: `failed: <error>` or `was closed`). */
      lost: (id: number, why: string) => A;
    },
  ) {}

  /** Posts a request (its id added); `answer` resolves with the thread's answer to it. */
  request(message: Record<string, unknown>, transfer?: ReadonlyArray<ArrayBuffer>): { id: number; answer: Promise<A> } {
    const worker = this.started();
    const id = ++this.next;
    const answer = new Promise<A>((resolve) => this.waiting.set(id, resolve));
    if (this.o.refWhileBusy) worker.ref();
    worker.postMessage({ id, ...message }, transfer as ArrayBuffer[] | undefined);
    return { id, answer };
  }

  /** A message that expects no answer (a kill, say); nothing when no thread runs. */
  post(message: Record<string, unknown>): void {
    this.worker?.postMessage(message);
  }

  /** Ends the thread: it is sent `{ shutdown: true }` and does its own clean-up before it exits. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (!worker) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.postMessage({ shutdown: true });
    await exited;
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.o.source, { eval: true, workerData: this.o.workerData?.() });
    this.worker = worker;
    worker.on('message', (a: A) => {
      const w = this.waiting.get(a.id);
      this.waiting.delete(a.id);
      if (this.o.refWhileBusy && !this.waiting.size) worker.unref();
      w?.(a);
    });
    const gone = (why: string) => {
      if (this.worker === worker) this.worker = null;
      for (const [id, w] of this.waiting) w(this.o.lost(id, why));
      this.waiting.clear();
    };
    worker.on('error', (err) => gone(`failed: ${err.message}`));
    worker.on('exit', () => gone('was closed'));
    // After the listeners: adding one references the thread again.
    worker.unref();
    return worker;
  }
}
