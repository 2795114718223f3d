import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { PgNotifications, Subscription } from '../core/db/notifications';
import type { Logger } from 'pino';

/**
 * One kind of row whose commit must lead to a started workflow: a webhook delivery, a
 * file to index. Producers write the row (and NOTIFY `channel`) in their own
 * transaction; the dispatcher starts the workflow and marks the row dispatched.
 */
export interface OutboxSource<T> {
  name: string;
  channel: string;
  pending(limit: number): Promise<T[]>;
  /** Starts the item's workflow; its workflow id is derived from the item, so a repeat start is refused by Temporal. */
  start(item: T): Promise<void>;
  markDispatched(item: T): Promise<void>;
}

const BATCH = 100;

/**
 * Relays the outboxes: woken by the NOTIFY that commits with each row, and by a
 * periodic sweep that catches a missed wake-up or a crash between commit and start.
 * Starting is idempotent (workflow ids are business ids), so a row started twice — by
 * a crash after the start and before the mark — still yields one workflow.
 */
export class OutboxDispatcher {
  private readonly listener: Subscription;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    notifications: PgNotifications,
    private readonly sources: ReadonlyArray<OutboxSource<any>>,
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
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drainAll()
      .catch((err) => this.log.error({ err }, 'outbox dispatch failed; retrying on the next sweep'))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async drainAll(): Promise<void> {
    for (const source of this.sources) await this.drain(source);
  }

  private async drain<T>(source: OutboxSource<T>): Promise<void> {
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
      if (batch.length < BATCH || this.stopped) return;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await this.listener.stop();
  }
}
