import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { PgNotifications, Subscription } from '../core/db/notifications';
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
  markDispatched(item: T): Promise<void>;
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
        await Promise.all(
          batch.map(async (item) => {
            try {
              await source.start(item);
            } catch (err) {
              if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
            }
            await source.markDispatched(item);
          }),
        );
        if (batch.length < BATCH) return;
      }
    },
  };
}

/**
 * Relays the outboxes: woken by the NOTIFY that commits with each row, and by a
 * periodic sweep that catches a missed wake-up or a crash between commit and hand-over.
 */
export class OutboxDispatcher {
  private readonly listener: Subscription;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    notifications: PgNotifications,
    private readonly sources: ReadonlyArray<OutboxSource>,
    private readonly log: Pick<Logger, 'warn' | 'error'>,
    private readonly sweepIntervalMs = 5_000,
  ) {
    // A lost connection only delays wake-ups: the sweep carries on; reconnecting sweeps at once.
    this.listener = notifications.subscribe(sources.map((s) => s.channel), { onNotify: () => this.kick(), onReady: () => this.kick() }, 'outbox dispatcher');
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.timer = setInterval(() => this.kick(), this.sweepIntervalMs);
    this.timer.unref();
  }

  /** Runs a dispatch pass now, or right after the one under way. */
  kick = (): void => {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drainAll().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  };

  private async drainAll(): Promise<void> {
    // One source failing (its database query, Temporal unreachable) never holds up the others.
    for (const source of this.sources) {
      if (this.stopped) return;
      await source.drain(this.kick).catch((err) => this.log.error({ err, source: source.name }, 'outbox dispatch failed; retrying on the next sweep'));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await Promise.all(this.sources.map((s) => s.stop?.()));
    await this.listener.stop();
  }
}
