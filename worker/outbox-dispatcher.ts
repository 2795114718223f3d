import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { PgNotifications, Subscription } from '../db/notifications';
import type { Logger } from 'pino';

/**
 * One kind of row whose commit must lead to work outside the transaction: a webhook
 * delivery to attempt, a file to index, an inbound message to process. Producers write
 * the row (and NOTIFY `channel`) in their own transaction; the dispatcher asks the
 * source to hand on what is pending.
 */
export interface OutboxSource {
  name: string;
  channel: string;
  /**
   * Hands on what is pending now; resolves when nothing is left that this pass can take.
   * `kick` asks for another pass (a source with work under way calls it when it has room again).
   */
  drain(kick: () => void): Promise<void>;
  /** Waits for work the source still has under way (called once, on stop). */
  stop?(): Promise<void>;
}

/** A source whose rows each start one workflow, its id derived from the row (so a repeat start is refused by Temporal). */
export interface WorkflowStartSource<T> {
  name: string;
  channel: string;
  pending(limit: number): Promise<T[]>;
  start(item: T): Promise<void>;
  /** Marks the pass's started rows, in one statement. */
  markDispatched(items: T[]): Promise<void>;
}

const BATCH = 100;

/**
 * Starting is idempotent (workflow ids are business ids), so a row started twice — by a
 * crash after the start and before the mark — still yields one workflow.
 */
export function startsWorkflows<T>(source: WorkflowStartSource<T>): OutboxSource {
  return {
    name: source.name,
    channel: source.channel,
    async drain() {
      for (;;) {
        const batch = await source.pending(BATCH);
        const settled = await Promise.allSettled(
          batch.map(async (item) => {
            try {
              await source.start(item);
            } catch (err) {
              if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
            }
          }),
        );
        // The rows started (or started before) are marked together; a row whose start failed stays for the next pass.
        const started = batch.filter((_, i) => settled[i].status === 'fulfilled');
        if (started.length) await source.markDispatched(started);
        const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
        if (batch.length < BATCH) return;
      }
    },
  };
}

/**
 * Relays the outboxes: woken by the NOTIFY that commits with each row (only the source
 * of that channel drains), and by a periodic sweep of every source that catches a missed
 * wake-up or a crash between commit and hand-over. Sources drain independently: one that
 * is slow or failing never holds up the others.
 */
export class OutboxDispatcher {
  private readonly listener: Subscription;
  private timer: NodeJS.Timeout | null = null;
  private readonly state = new Map<OutboxSource, { running: Promise<void> | null; again: boolean; kick: () => void }>();
  private stopped = false;

  constructor(
    notifications: PgNotifications,
    private readonly sources: ReadonlyArray<OutboxSource>,
    private readonly log: Pick<Logger, 'warn' | 'error'>,
    private readonly sweepIntervalMs = 5_000,
  ) {
    for (const source of sources) {
      const st = { running: null as Promise<void> | null, again: false, kick: () => this.kickSource(source) };
      this.state.set(source, st);
    }
    // A lost connection only delays wake-ups: the sweep carries on; reconnecting sweeps at once.
    this.listener = notifications.subscribe(
      [...new Set(sources.map((s) => s.channel))],
      { onNotify: (channel) => sources.filter((s) => s.channel === channel).forEach((s) => this.kickSource(s)), onReady: () => this.kick() },
      'outbox dispatcher',
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.timer = setInterval(() => this.kick(), this.sweepIntervalMs);
    this.timer.unref();
  }

  /** Runs a dispatch pass of every source now, or right after the one under way. */
  kick = (): void => {
    for (const source of this.sources) this.kickSource(source);
  };

  private kickSource(source: OutboxSource): void {
    const st = this.state.get(source)!;
    if (this.stopped) return;
    if (st.running) {
      st.again = true;
      return;
    }
    st.running = source
      .drain(st.kick)
      .catch((err) => this.log.error({ err, source: source.name }, 'outbox dispatch failed; retrying on the next sweep'))
      .finally(() => {
        st.running = null;
        if (st.again) {
          st.again = false;
          this.kickSource(source);
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await Promise.all([...this.state.values()].map((st) => st.running));
    await Promise.all(this.sources.map((s) => s.stop?.()));
    await this.listener.stop();
  }
}
