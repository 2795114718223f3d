/**
 * Who a job of a shared pool is for: its workspace, and whether it is anonymous work (a
 * widget visitor's upload or voice note), which runs in a bounded lane of its own.
 */
export interface PoolOwner {
  workspaceId: string;
  anonymous?: boolean;
}

interface Job {
  anonymous: boolean;
  start: () => void;
}

interface Tenant {
  waiting: Job[];
  running: number;
  /** When it last got a slot (the pool's own counter); 0: not since it was idle. */
  servedAt: number;
}

/**
 * A counting semaphore that is fair across workspaces: at most `slots` jobs run at once,
 * and a free slot goes to the waiting workspace with the fewest jobs running, the one
 * served longest ago among equals (round-robin), not to the oldest job. A workspace that
 * queues a hundred files therefore delays another workspace's one file by at most the
 * jobs already running, not by its backlog. Anonymous jobs (widget visitors: anyone on the
 * internet may start them) may hold at most `anonymousSlots` of the slots, so indexing and
 * API extraction always have capacity when there is more than one slot.
 *
 * In-process on purpose: it guards this process's CPU and memory (one extraction child
 * per slot), which no other process shares.
 */
export class FairPool {
  private active = 0;
  private activeAnonymous = 0;
  private clock = 0;
  /** Workspaces with jobs waiting or running (Map order: first come first among equals). */
  private readonly tenants = new Map<string, Tenant>();

  readonly anonymousSlots: number;

  constructor(
    readonly slots: number,
    anonymousSlots = slots,
  ) {
    if (!(slots >= 1)) throw new Error('a pool needs at least one slot');
    this.anonymousSlots = Math.max(1, Math.min(slots, anonymousSlots));
  }

  /** Jobs waiting for a slot (tests, metrics). */
  get queued(): number {
    let n = 0;
    for (const t of this.tenants.values()) n += t.waiting.length;
    return n;
  }

  get running(): number {
    return this.active;
  }

  /** Runs `fn` once a slot is free and it is `owner`'s turn; an owner-less job counts as one workspace of its own. */
  async run<T>(owner: PoolOwner | undefined, fn: () => Promise<T>): Promise<T> {
    const anonymous = owner?.anonymous === true;
    const key = owner?.workspaceId ?? '';
    await new Promise<void>((start) => {
      let tenant = this.tenants.get(key);
      if (!tenant) this.tenants.set(key, (tenant = { waiting: [], running: 0, servedAt: 0 }));
      tenant.waiting.push({ anonymous, start });
      this.pump();
    });
    try {
      return await fn();
    } finally {
      this.active--;
      if (anonymous) this.activeAnonymous--;
      const tenant = this.tenants.get(key)!;
      tenant.running--;
      if (!tenant.running && !tenant.waiting.length) this.tenants.delete(key);
      this.pump();
    }
  }

  /** Starts jobs while there are free slots, each time for the workspace whose turn it is. */
  private pump(): void {
    while (this.active < this.slots) {
      const picked = this.pick();
      if (!picked) return;
      const [tenant, job] = picked;
      tenant.running++;
      tenant.servedAt = ++this.clock;
      this.active++;
      if (job.anonymous) this.activeAnonymous++;
      job.start();
    }
  }

  private pick(): [Tenant, Job] | null {
    const anonymousFull = this.activeAnonymous >= this.anonymousSlots;
    let best: Tenant | null = null;
    let bestIndex = -1;
    for (const t of this.tenants.values()) {
      // A workspace's anonymous job waits for the lane; its own other jobs may go first.
      const i = anonymousFull ? t.waiting.findIndex((job) => !job.anonymous) : t.waiting.length ? 0 : -1;
      if (i < 0) continue;
      if (!best || t.running < best.running || (t.running === best.running && t.servedAt < best.servedAt)) {
        best = t;
        bestIndex = i;
      }
    }
    if (!best) return null;
    const [job] = best.waiting.splice(bestIndex, 1);
    return [best, job];
  }
}
