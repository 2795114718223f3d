import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { AttemptRows, DeliveryService, DispatchItem } from '../domain/webhooks/deliveries';
import { OUTBOX_CHANNEL } from '../domain/webhooks/events';
import { webhookDeliveryWorkflow } from '../workflows';
import { deliveryRunSignal, deliveryWorkflowId, type NewRun, type WebhookDeliveryInput } from '../workflows/webhook-delivery';
import type { OutboxSource } from './outbox-dispatcher';
import { searchAttributesFor } from '../app/temporal-clients/search-attributes';


export interface WebhookOutboxSettings {
  taskQueue: string;
  /** The five waits between the six attempts. */
  backoffMs: number[];
  /** Time-out of one attempt (the dispatcher's first one included). */
  timeoutMs: number;
  /**
   * First attempts the dispatcher makes itself at once, overall and per subscription (a
   * slow endpoint holds only its own). `overall: 0`: every delivery starts its workflow
   * at attempt 1, as before the inline path existed.
   */
  inline?: { overall: number; perSubscription: number };
  /** The client shares this process's worker's native connection: retry workflows start eagerly (their first task comes back with the start). */
  eager?: boolean;
}

/** Room for work under way, overall and per key. */
export class KeyedSlots {
  private total = 0;
  private readonly byKey = new Map<string, number>();
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly overall: number,
    private readonly perKey: number,
  ) {}

  room(): number {
    return Math.max(0, this.overall - this.total);
  }

  /** Keys at their own limit. */
  full(): string[] {
    return [...this.byKey].filter(([, n]) => n >= this.perKey).map(([k]) => k);
  }

  tryAcquire(key: string): boolean {
    const n = this.byKey.get(key) ?? 0;
    if (this.total >= this.overall || n >= this.perKey) return false;
    this.total++;
    this.byKey.set(key, n + 1);
    return true;
  }

  /**
   * Whether a pass is worth running after `key` released a slot: its subscription has a
   * batch of slots free again, or the overall room just reached a batch. Passes for every
   * single freed slot would read and lease one row at a time.
   */
  worthAPass(key: string, batch: number): boolean {
    const n = this.byKey.get(key) ?? 0;
    return n === 0 || n === this.perKey - batch || this.overall - this.total === batch;
  }

  release(key: string): void {
    const n = (this.byKey.get(key) ?? 1) - 1;
    if (n > 0) this.byKey.set(key, n);
    else this.byKey.delete(key);
    this.total--;
    if (this.total === 0) for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves once nothing is held. */
  idle(): Promise<void> {
    return this.total === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}

/**
 * Webhook deliveries leave the outbox here. The dispatcher makes the **first attempt**
 * itself (one signed POST with the full per-attempt time-out, logged like any attempt),
 * from bounded slots overall and per subscription; only a delivery whose first attempt
 * fails gets a retry workflow (`webhook-delivery:dlv_…`), which continues at attempt 2
 * with the same schedule and failure accounting. While a first attempt is open its row
 * is leased (time-out + margin), so no dispatcher POSTs it twice; a dispatcher lost
 * mid-attempt lets the lease expire and the delivery is taken again (at-least-once, as
 * `X-Concierge-Delivery` lets receivers deduplicate). A row leaves the outbox
 * (`dispatched_at`) only once it is delivered or its workflow is started.
 */
export class WebhookOutbox implements OutboxSource {
  readonly name = 'webhook-deliveries';
  readonly channel = OUTBOX_CHANNEL;
  private readonly slots: KeyedSlots | null;
  private readonly leaseMs: number;
  /** Slots freed before another pass runs (a quarter of a subscription's). */
  private readonly batch: number;

  constructor(
    private readonly deliveries: DeliveryService,
    private readonly client: Client,
    private readonly s: WebhookOutboxSettings,
    private readonly log?: Pick<Logger, 'warn' | 'error'>,
  ) {
    const inline = s.inline ?? { overall: 64, perSubscription: 16 };
    const perSubscription = Math.max(1, inline.perSubscription);
    this.slots = inline.overall > 0 ? new KeyedSlots(inline.overall, perSubscription) : null;
    this.batch = Math.max(1, Math.floor(Math.min(perSubscription, inline.overall) / 4));
    // The POST's own time-out, the database writes around it, and a margin for a loaded event loop.
    this.leaseMs = s.timeoutMs + 10_000;
  }

  async drain(kick: () => void): Promise<void> {
    if (!this.slots) return this.startAllAsWorkflows();
    const slots = this.slots;
    for (;;) {
      const room = slots.room();
      if (room === 0) return;
      const limit = Math.min(room, 100);
      const items = await this.deliveries.undispatched(limit, slots.full());
      // Slots first (in memory), then one statement leases every run that got one; only those are attempted.
      const fitting = items.filter((item) => slots.tryAcquire(item.subscription_id));
      let leased = new Set<string>();
      try {
        leased = await this.deliveries.leaseFirstAttempts(fitting, this.leaseMs);
      } finally {
        for (const item of fitting) if (!leased.has(item.id)) slots.release(item.subscription_id);
      }
      const taken = fitting.filter((item) => leased.has(item.id));
      // The subscriptions and events of the whole batch in two reads, not two per delivery.
      const rows = await this.deliveries.attemptRows(taken).catch(() => null);
      for (const item of taken) {
        void this.firstAttempt(item, rows).finally(() => {
          slots.release(item.subscription_id);
          if (slots.worthAPass(item.subscription_id, this.batch)) kick();
        });
      }
      if (items.length < limit || leased.size === 0) return;
    }
  }

  private async firstAttempt(item: DispatchItem, rows: AttemptRows | null): Promise<void> {
    try {
      const result = await this.deliveries.firstAttempt(item, rows ?? undefined);
      if (result.outcome === 'delivered') {
        // Settled with the attempt's own log record, or (a logged attempt found again) here: the run, the
        // subscription's failure count and the outbox, in one statement.
        if (!result.recorded) await this.deliveries.recordOutcome(item.id, item.run, true, null, { leaveOutbox: true });
        if (item.run > 1) await this.tellWaitingRun(item, { run: item.run, outcome: 'delivered', error: null });
        return;
      }
      if (result.outcome === 'failed_attempt') await this.startRetries(item, { firstAttempt: 2, previousError: result.error });
      await this.deliveries.markDispatched(item.id, item.run);
    } catch (err) {
      // Nothing is lost: the row stays in the outbox and the next pass takes it again (a logged first attempt is
      // not POSTed again).
      this.log?.error({ err, deliveryId: item.id }, 'webhook first attempt could not be handed over; retrying on the next sweep');
      await this.deliveries.releaseFirstAttempt(item.id, item.run).catch(() => undefined);
    }
  }

  /**
   * A retried or replayed run delivered by its attempt 1: the delivery's retry workflow, if a run of it is open (an
   * exhausted run waits for this), records `delivered` and completes, so Temporal never keeps saying `failed`. No
   * open run (the delivery never needed one, or it was cancelled): nothing to tell.
   */
  private async tellWaitingRun(item: DispatchItem, newRun: NewRun): Promise<void> {
    try {
      await this.client.workflow.getHandle(deliveryWorkflowId(item.id)).signal(deliveryRunSignal, newRun);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      // The record is settled either way; only Temporal's view lags until maintenance:reconcile (every 5 minutes)
      // finds the run waiting `failed` with its delivery delivered and tells it.
      this.log?.warn({ err, deliveryId: item.id }, 'could not tell the delivery\'s waiting retry run that it was delivered; the reconciliation will');
    }
  }

  /**
   * The retry workflow of a delivery, from `firstAttempt` on. A retried or replayed run (run > 1) goes to the
   * delivery's workflow by signal-with-start: an exhausted run waiting there carries on with this run (one
   * workflow, one truth in Temporal); when none is open, a new one starts (the signal then repeats its input).
   */
  private async startRetries(item: DispatchItem, from: { firstAttempt: number; previousError: string | null }): Promise<void> {
    const s = this.s;
    const attempts = s.backoffMs.length + 1;
    const plan = `up to ${attempts} signed POSTs, ${s.timeoutMs} ms each, waits ${s.backoffMs.join(', ')} ms`;
    try {
      const options = {
        workflowId: deliveryWorkflowId(item.id),
        taskQueue: s.taskQueue,
        args: [{ deliveryId: item.id, run: item.run, backoffMs: s.backoffMs, timeoutMs: s.timeoutMs, firstAttempt: from.firstAttempt, previousError: from.previousError }] as [WebhookDeliveryInput],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id, subscriptionId: item.subscription_id, eventType: item.event_type }),
        staticSummary: `${item.event_type} → ${(await this.deliveries.urlHost(item.subscription_id)) ?? item.subscription_id}`,
        staticDetails:
          from.firstAttempt > 1
            ? `Delivery ${item.id} (run ${item.run}) of subscription ${item.subscription_id}: attempt 1 was made by the outbox dispatcher and failed (${from.previousError}); this workflow makes attempts ${from.firstAttempt}–${attempts} (${plan}).`
            : `Delivery ${item.id} (run ${item.run}) of subscription ${item.subscription_id}: ${plan}.`,
      };
      if (item.run > 1) {
        const newRun: NewRun = { run: item.run, outcome: from.firstAttempt > 1 ? 'failed' : 'none', error: from.previousError };
        await this.client.workflow.signalWithStart(webhookDeliveryWorkflow, { ...options, signal: deliveryRunSignal, signalArgs: [newRun] });
      } else {
        await this.client.workflow.start(webhookDeliveryWorkflow, { ...options, requestEagerStart: s.eager ?? false });
      }
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  /** Without inline slots: every delivery starts its workflow at attempt 1. */
  private async startAllAsWorkflows(): Promise<void> {
    for (;;) {
      const batch = await this.deliveries.undispatched(100);
      await Promise.all(
        batch.map(async (item) => {
          await this.startRetries(item, { firstAttempt: 1, previousError: null });
          await this.deliveries.markDispatched(item.id, item.run);
        }),
      );
      if (batch.length < 100) return;
    }
  }

  /** Waits for the first attempts under way (each ends within its time-out). */
  async stop(): Promise<void> {
    await this.slots?.idle();
  }
}
