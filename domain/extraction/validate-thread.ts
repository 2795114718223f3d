import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { OperationalError } from '../../lib/failures';
import type { Draft } from './regex';
import type { ValidationJob, ValidationReply, ValidationResult } from './validate-worker';

export type { ValidationResult } from './validate-worker';

/**
 * Validation of model answers against a caller's schema, in worker threads with a
 * deadline. RE2 (./regex.ts) already makes every caller pattern linear, but a schema is
 * still the caller's program (formats, large `allOf`s over large answers): run on the
 * worker's main thread, one slow validation would stop its heartbeats, its other
 * activities and `/healthz`. Here it runs beside them, and a thread past the deadline is
 * terminated (its job fails with ValidationTimeout: 422 extraction_failed).
 *
 * A small pool: threads are started when needed (tsx's hook loads ./validate-worker.ts
 * under tsx and Jest, as the extraction child does), reused, and stopped when idle.
 */

/** The deadline of one validation job (all the values of one call). */
export const DEFAULT_VALIDATION_TIMEOUT_MS = 2_000;
/** How long a thread may take to start (load ajv, compile the formats) before the job fails. */
const START_TIMEOUT_MS = 30_000;
/** An idle thread is stopped after this long. */
const IDLE_MS = 60_000;

/** Validation did not finish by its deadline; the thread was terminated. Final: the same answer would take as long again. */
export class ValidationTimeout extends OperationalError {
  constructor(ms: number) {
    super('ValidationTimeout', `validating the model's answer against the schema took longer than ${ms} ms and was stopped`, false);
  }
}

/** The thread died or could not start (memory cap, a bug): final for this extraction. */
export class ValidationCrash extends OperationalError {
  constructor(detail: string) {
    super('ValidationCrash', 'validating the model\'s answer against the schema failed', false, { detail });
  }
}

/** Loads the entry in the thread; `tsx` is set when the entry is TypeScript. */
const THREAD_SOURCE = `
const { workerData } = require('node:worker_threads');
if (workerData.tsx) require(workerData.tsx);
require(workerData.entry);
`;

function threadEntry(): { entry: string; tsx: string | null } {
  const ext = path.extname(__filename);
  const entry = path.join(__dirname, `validate-worker${ext}`);
  return { entry, tsx: ext === '.ts' ? require.resolve('tsx/cjs') : null };
}

interface Slot {
  worker: Worker;
  idle: NodeJS.Timeout | null;
}

export interface ValidatorOptions {
  /** Deadline of one job (STRUCTURED_VALIDATION_TIMEOUT_MS). */
  timeoutMs?: number;
  /** Most threads at once. */
  threads?: number;
}

export class SchemaValidator {
  private readonly timeoutMs: number;
  private readonly threads: number;
  private readonly idle: Slot[] = [];
  private readonly waiting: Array<(slot: Slot) => void> = [];
  private live = 0;
  private nextId = 1;
  private closed = false;

  constructor(opts: ValidatorOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_VALIDATION_TIMEOUT_MS;
    this.threads = opts.threads ?? 2;
  }

  /** Threads alive now (tests: a thread past its deadline is gone). */
  get liveThreads(): number {
    return this.live;
  }

  /** Each value validated against the schema, in one job with one deadline. */
  async validate(schema: { draft: Draft; hash: string; schema: Record<string, unknown> }, values: unknown[]): Promise<ValidationResult[]> {
    if (this.closed) throw new ValidationCrash('the validator is closed');
    const slot = await this.acquire();
    const job: ValidationJob = { id: this.nextId++, draft: schema.draft, hash: schema.hash, schema: schema.schema, values };
    return new Promise<ValidationResult[]>((resolve, reject) => {
      const { worker } = slot;
      const done = (settle: () => void, keep: boolean) => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('exit', onExit);
        if (keep) this.release(slot);
        else this.discard(slot);
        settle();
      };
      const timer = setTimeout(() => done(() => reject(new ValidationTimeout(this.timeoutMs)), false), this.timeoutMs);
      const onMessage = (reply: ValidationReply) => {
        if (reply.id !== job.id) return;
        if ('error' in reply) done(() => reject(new ValidationCrash(reply.error)), true);
        else done(() => resolve(reply.results), true);
      };
      const onExit = (code: number) => done(() => reject(new ValidationCrash(`the validation thread exited (${code})`)), false);
      worker.on('message', onMessage);
      worker.on('exit', onExit);
      worker.postMessage(job);
    });
  }

  private async acquire(): Promise<Slot> {
    const slot = this.idle.pop();
    if (slot) {
      if (slot.idle) clearTimeout(slot.idle);
      slot.idle = null;
      return slot;
    }
    if (this.live < this.threads) return this.start();
    return new Promise<Slot>((resolve) => this.waiting.push(resolve));
  }

  private release(slot: Slot): void {
    const next = this.waiting.shift();
    if (next) return next(slot);
    if (this.closed) return this.discard(slot);
    slot.idle = setTimeout(() => {
      const at = this.idle.indexOf(slot);
      if (at >= 0) this.idle.splice(at, 1);
      this.discard(slot);
    }, IDLE_MS);
    slot.idle.unref();
    this.idle.push(slot);
  }

  /** Terminates a thread (past its deadline, dead, idle); a waiting job gets a new one. */
  private discard(slot: Slot): void {
    if (slot.idle) clearTimeout(slot.idle);
    this.live--;
    void slot.worker.terminate();
    const next = this.waiting.shift();
    if (next && !this.closed) {
      this.start().then(next, () => {
        // Could not start: the job waits for the next thread that frees up.
        this.waiting.unshift(next);
      });
    }
  }

  private start(): Promise<Slot> {
    this.live++;
    const worker = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: threadEntry(),
      // A memory bomb of an answer kills the thread, not the worker process.
      resourceLimits: { maxOldGenerationSizeMb: 256 },
      env: {},
    });
    // The thread never keeps the process alive: close() or the idle timer stop it.
    worker.unref();
    // An uncaught error in the thread is followed by its exit, which the running job sees; without a listener it would throw here.
    worker.on('error', () => undefined);
    return new Promise<Slot>((resolve, reject) => {
      let settled = false;
      const fail = (why: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.live--;
        void worker.terminate();
        reject(new ValidationCrash(why));
      };
      const timer = setTimeout(() => fail('the validation thread did not start in time'), START_TIMEOUT_MS);
      worker.once('error', (err) => fail(`the validation thread failed: ${err.message}`));
      // The thread's first message is its `ready` (./validate-worker.ts).
      worker.once('message', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ worker, idle: null });
      });
    });
  }

  /** Stops every thread; later calls are refused. */
  async close(): Promise<void> {
    this.closed = true;
    const slots = this.idle.splice(0);
    await Promise.all(
      slots.map(async (s) => {
        if (s.idle) clearTimeout(s.idle);
        this.live--;
        await s.worker.terminate();
      }),
    );
  }
}
