import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import type { Logger } from 'pino';
import type { DeliveryService, DispatchItem } from '../core/webhooks/deliveries';
import { OUTBOX_CHANNEL } from '../core/webhooks/events';
import { webhookDeliveryWorkflow } from '../workflows';
import { searchAttributesFor } from './search-attributes';

export interface DispatcherSettings {
  taskQueue: string;
  backoffMs: number[];
  timeoutMs: number;
  /** The sweep that catches what a missed NOTIFY or a crash left behind. */
  sweepIntervalMs?: number;
}

export const deliveryWorkflowId = (deliveryId: string) => `webhook-delivery:${deliveryId}`;

/**
 * Relays the outbox: starts one delivery workflow per undispatched delivery. Woken by
 * the NOTIFY that commits with each event, and by a periodic sweep. Starting is
 * idempotent: the workflow id is the delivery id, so a second start of a running
 * delivery is refused by Temporal, and a second start of a settled run finds the run
 * settled and sends nothing.
 */
export class OutboxDispatcher {
  private listener: PgClient | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly deliveries: DeliveryService,
    private readonly client: Client,
    private readonly settings: DispatcherSettings,
    private readonly log: Pick<Logger, 'warn' | 'error'>,
  ) {}

  async start(): Promise<void> {
    await this.listen();
    this.timer = setInterval(() => this.kick(), this.settings.sweepIntervalMs ?? 5_000);
    this.timer.unref();
    this.kick();
  }

  private async listen(): Promise<void> {
    const pg = new PgClient({ connectionString: this.databaseUrl });
    pg.on('notification', () => this.kick());
    pg.on('error', (err) => {
      this.log.warn({ err: err.message }, 'outbox listener lost; the sweep carries on and it reconnects');
      this.listener = null;
      pg.removeAllListeners();
      if (!this.stopped) setTimeout(() => void this.listen().catch(() => undefined), 1_000).unref();
    });
    await pg.connect();
    await pg.query(`listen ${OUTBOX_CHANNEL}`);
    this.listener = pg;
  }

  /** Runs a dispatch pass now, or right after the one under way. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .catch((err) => this.log.error({ err }, 'outbox dispatch failed; retrying on the next sweep'))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async drain(): Promise<void> {
    for (;;) {
      const batch = await this.deliveries.undispatched(100);
      await Promise.all(batch.map((item) => this.dispatch(item)));
      if (batch.length < 100 || this.stopped) return;
    }
  }

  private async dispatch(item: DispatchItem): Promise<void> {
    try {
      await this.client.workflow.start(webhookDeliveryWorkflow, {
        workflowId: deliveryWorkflowId(item.id),
        taskQueue: this.settings.taskQueue,
        args: [{ deliveryId: item.id, run: item.run, backoffMs: this.settings.backoffMs, timeoutMs: this.settings.timeoutMs }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id, subscriptionId: item.subscription_id, eventType: item.event_type }),
      });
    } catch (err) {
      // Already running: this delivery's workflow exists, which is all we wanted.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    await this.deliveries.markDispatched(item.id, item.run);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
    const pg = this.listener;
    this.listener = null;
    if (pg) {
      pg.removeAllListeners();
      pg.on('error', () => undefined);
      await pg.end().catch(() => undefined);
    }
  }
}
