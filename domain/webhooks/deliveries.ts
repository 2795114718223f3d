import { LockMode, sql } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookSubscription, type IWebhookDelivery, type IWebhookEvent, type IWebhookSubscription } from '../../db/entities';
import { DomainError } from '../errors';
import { keysetFind } from '../../db/pagination';
import type { WebhookRepository } from './emitter';
import { DISABLE_AFTER_FAILURES } from './events';
import { sendSigned, type SenderSettings } from './sender';
import { countWebhookAttempt } from '../metrics';

export interface DeliveryView {
  id: string;
  event_id: string;
  event_type: string;
  subscription_id: string;
  status: 'pending' | 'delivered' | 'failed';
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
}

export interface AttemptView {
  run: number;
  attempt: number;
  started_at: string;
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  response_body: string | null;
}

/** What the dispatcher needs to attempt a delivery and, when that fails, start its retry workflow. */
export interface DispatchItem {
  id: string;
  run: number;
  workspace_id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  /** A first attempt of this run was leased before (it may have been made): its log is read before POSTing again. */
  leased_before: boolean;
}

export interface AttemptResult {
  /** `gone`: deleted; `settled`: this run already ended (a duplicate workflow start). */
  outcome: 'delivered' | 'failed_attempt' | 'gone' | 'settled';
  statusCode: number;
  error: string | null;
  /** The start of the receiver's answer (1 KB at most), when it answered. */
  responseBody?: string | null;
}

/** At most this many deliveries move back to the outbox per POST /api/v1/webhook-deliveries/retry (call again for more). */
export const RETRY_ALL_MAX = 500;

/** What the list of a workspace's deliveries and "retry all" filter on. */
export interface DeliveryFilter {
  subscription_id?: string;
  /** Created at or after (inclusive). */
  since?: Date;
  /** Created before (exclusive). */
  until?: Date;
}

/** A subscription's in-flight trouble: what the counters of exhausted deliveries alone do not show. */
export interface SubscriptionHealth {
  /** The first failed attempt (or failed or cancelled delivery) since the last delivery; null when none failed since. */
  failing_since: string | null;
  /** Deliveries in a retry run now (their first attempt failed, later ones are under way or waiting). */
  retrying_now: number;
  /** Deliveries failed now (every attempt failed, or cancelled by an operator) that no retry has taken again. */
  failed_now: number;
  /** The newest failed attempt's error (or a cancelled delivery's reason) since the last delivery; null when none. */
  last_error: string | null;
  last_delivered_at: string | null;
}

/** The subscriptions and events of a batch of first attempts, read together. */
export interface AttemptRows {
  subscriptions: Map<string, IWebhookSubscription>;
  events: Map<string, IWebhookEvent>;
}

/** A settled delivery back in the outbox as a new run of attempts (retry, replay): same id, same body. */
function startNewRun(row: IWebhookDelivery): void {
  row.status = 'pending';
  row.run += 1;
  row.dispatchedAt = null;
  row.inlineLeaseUntil = null;
  row.completedAt = null;
  row.updatedAt = new Date();
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

function view(r: IWebhookDelivery): DeliveryView {
  return {
    id: r.id,
    event_id: r.eventId,
    event_type: r.eventType,
    subscription_id: r.subscriptionId,
    status: r.status,
    attempt_count: r.attemptCount,
    last_status_code: r.lastStatusCode ?? null,
    last_error: r.lastError ?? null,
    created_at: iso(r.createdAt)!,
    updated_at: iso(r.updatedAt)!,
    completed_at: iso(r.completedAt),
  };
}

/**
 * Deliveries: the attempt and the outcome accounting the delivery workflow calls, and the
 * log, retry and replay endpoints. Outcome accounting is one SQL statement that moves the
 * delivery out of `pending` and updates its subscription's counters: the subscription row
 * lock serialises concurrent deliveries, and the state move makes a repeated call (an
 * activity retry) a no-op.
 */
export class DeliveryService {
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly sender: SenderSettings,
    private readonly webhooks: Pick<WebhookRepository, 'notifyOutbox'>,
  ) {}

  /**
   * Runs still in the outbox, oldest first: not yet delivered by a first attempt nor handed
   * to a retry workflow, and not leased by a first attempt under way. `skipSubscriptions`:
   * subscriptions whose first attempts are at their limit in this dispatcher.
   */
  async undispatched(limit: number, skipSubscriptions: string[] = []): Promise<DispatchItem[]> {
    const now = new Date();
    const rows = await this.em.fork().find(
      WebhookDelivery,
      {
        dispatchedAt: null,
        $or: [{ inlineLeaseUntil: null }, { inlineLeaseUntil: { $lt: now } }],
        ...(skipSubscriptions.length ? { subscriptionId: { $nin: skipSubscriptions } } : {}),
      },
      { orderBy: { createdAt: 'asc', id: 'asc' }, limit, fields: ['id', 'run', 'workspaceId', 'subscriptionId', 'eventId', 'eventType', 'inlineLeaseUntil'] },
    );
    return rows.map((r) => ({
      id: r.id,
      run: r.run,
      workspace_id: r.workspaceId,
      subscription_id: r.subscriptionId,
      event_id: r.eventId,
      event_type: r.eventType,
      leased_before: r.inlineLeaseUntil != null,
    }));
  }

  /** The subscription URL's host, for a retry workflow's summary in the Temporal UI (null once the subscription is gone). */
  async urlHost(subscriptionId: string): Promise<string | null> {
    const sub = await this.em.fork().findOne(WebhookSubscription, { id: subscriptionId }, { fields: ['url'] });
    return sub && URL.canParse(sub.url) ? new URL(sub.url).host : null;
  }

  async markDispatched(id: string, run: number): Promise<void> {
    await this.em.fork().nativeUpdate(WebhookDelivery, { id, run, dispatchedAt: null }, { dispatchedAt: new Date(), inlineLeaseUntil: null });
  }

  /**
   * Takes a run for the dispatcher's first attempt: only one dispatcher wins, and no other
   * takes it again before `leaseMs` has passed (longer than the attempt's time-out, so a
   * POST still open is never attempted twice; a dispatcher lost mid-attempt lets it expire).
   */
  async leaseFirstAttempts(runs: Array<{ id: string; run: number }>, leaseMs: number): Promise<Set<string>> {
    if (!runs.length) return new Set();
    const now = new Date();
    // The QueryBuilder's own UPDATE … RETURNING (which runs were leased), not raw SQL.
    // eslint-disable-next-line no-restricted-syntax
    const leased = await this.em
      .fork()
      .createQueryBuilder(WebhookDelivery)
      .update({ inlineLeaseUntil: new Date(now.getTime() + leaseMs) })
      .where({
        $and: [
          { $or: runs.map((r) => ({ id: r.id, run: r.run })) },
          { dispatchedAt: null, status: 'pending' },
          { $or: [{ inlineLeaseUntil: null }, { inlineLeaseUntil: { $lt: now } }] },
        ],
      })
      .returning(['id'])
      .execute<Array<{ id: string }>>('all');
    return new Set(leased.map((r) => r.id));
  }

  /**
   * Gives a leased run back to the outbox at once (its hand-over failed): the next pass
   * takes it again. The lease is left expired, not cleared, so that pass reads the log first.
   */
  async releaseFirstAttempt(id: string, run: number): Promise<void> {
    await this.em.fork().nativeUpdate(WebhookDelivery, { id, run, dispatchedAt: null }, { inlineLeaseUntil: new Date(0) });
  }

  /**
   * The dispatcher's first attempt of a run it has just leased (so the run is current and
   * pending): the subscription and event are read at once, and one statement logs the
   * attempt and, when it delivered, settles the run, resets the subscription's failure
   * count and takes the run out of the outbox (`recorded`). When attempt 1 of this run is
   * already in the log (a dispatcher stopped after the POST, before the hand-over), its
   * result is used and nothing is POSTed again.
   */
  /** The subscriptions and events of the runs a dispatcher pass leased, in two reads. */
  async attemptRows(items: DispatchItem[]): Promise<AttemptRows> {
    if (!items.length) return { subscriptions: new Map(), events: new Map() };
    const [subs, events] = await Promise.all([
      this.em.fork().find(WebhookSubscription, { id: { $in: [...new Set(items.map((i) => i.subscription_id))] } }),
      this.em.fork().find(WebhookEvent, { id: { $in: [...new Set(items.map((i) => i.event_id))] } }),
    ]);
    return { subscriptions: new Map(subs.map((x) => [x.id, x])), events: new Map(events.map((x) => [x.id, x])) };
  }

  async firstAttempt(item: DispatchItem, rows?: AttemptRows): Promise<AttemptResult & { recorded?: boolean }> {
    const { id: deliveryId, run } = item;
    const em = this.em.fork();
    if (item.leased_before) {
      const logged = await em.findOne(WebhookAttempt, { deliveryId, run, attempt: 1 });
      if (logged) {
        const delivery = await em.findOne(WebhookDelivery, { id: deliveryId }, { fields: ['status', 'run'] });
        if (!delivery) return { outcome: 'gone', statusCode: 0, error: null };
        if (delivery.status !== 'pending' || delivery.run !== run) return { outcome: 'settled', statusCode: 0, error: null };
        const status = logged.statusCode ?? 0;
        return status >= 200 && status < 300
          ? { outcome: 'delivered', statusCode: status, error: null }
          : { outcome: 'failed_attempt', statusCode: status, error: logged.error ?? `HTTP ${status}` };
      }
    }
    const [sub, event] = rows
      ? [rows.subscriptions.get(item.subscription_id) ?? null, rows.events.get(item.event_id) ?? null]
      : await Promise.all([em.findOne(WebhookSubscription, { id: item.subscription_id }), this.em.fork().findOne(WebhookEvent, { id: item.event_id })]);
    // Subscription and event rows cascade to their deliveries: a missing one means the delivery is going too.
    if (!sub || !event) return countWebhookAttempt({ outcome: 'gone', statusCode: 0, error: null });
    const startedAt = new Date();
    const sent = await sendSigned(this.sender, {
      url: sub.url,
      secret: this.box.open(sub.secretSealed, sub.id),
      eventType: item.event_type,
      deliveryId,
      body: event.payload,
    });
    // raw SQL: one statement on the hot path — the log record, the count (only with a new record), and on success the
    // settled run out of the outbox and its subscription's counters (the same writes as recordOutcome's).
    // eslint-disable-next-line no-restricted-syntax
    await em.execute(
      `with logged as (
         insert into webhook_attempts (delivery_id, run, attempt, started_at, status_code, error, latency_ms, response_body)
         values (?, ?, 1, ?, ?, ?, ?, ?)
         on conflict (delivery_id, run, attempt) do nothing
         returning delivery_id),
       d as (
         update webhook_deliveries set
           attempt_count = attempt_count + (select count(*) from logged),
           last_status_code = ?, last_error = ?, updated_at = now(),
           status = case when ?::boolean then 'delivered' else status end,
           completed_at = case when ?::boolean then now() else completed_at end,
           dispatched_at = case when ?::boolean then now() else dispatched_at end,
           inline_lease_until = case when ?::boolean then null else inline_lease_until end
         where id = ? and run = ? and status = 'pending'
         returning subscription_id)
       update webhook_subscriptions s set consecutive_failures = 0, last_delivered_at = now(), updated_at = now()
       from d where ?::boolean and s.id = d.subscription_id`,
      [
        deliveryId,
        run,
        startedAt,
        sent.statusCode || null,
        sent.error,
        sent.latencyMs,
        sent.responseBody,
        sent.statusCode || null,
        sent.error,
        sent.ok,
        sent.ok,
        sent.ok,
        sent.ok,
        deliveryId,
        run,
        sent.ok,
      ],
    );
    return countWebhookAttempt({ outcome: sent.ok ? 'delivered' : 'failed_attempt', statusCode: sent.statusCode, error: sent.error, recorded: sent.ok });
  }

  /** One attempt (of a retry workflow): one signed POST of the stored body, logged. */
  async attempt(deliveryId: string, run: number, attempt: number): Promise<AttemptResult> {
    const em = this.em.fork();
    const delivery = await em.findOne(WebhookDelivery, { id: deliveryId });
    // Subscription and event rows cascade to their deliveries: a missing one means the delivery is going too.
    const sub = delivery && (await em.findOne(WebhookSubscription, { id: delivery.subscriptionId }));
    const event = delivery && sub && (await em.findOne(WebhookEvent, { id: delivery.eventId }));
    if (!delivery || !sub || !event) return countWebhookAttempt({ outcome: 'gone', statusCode: 0, error: null });
    if (delivery.status !== 'pending' || delivery.run !== run) return { outcome: 'settled', statusCode: 0, error: null };
    const startedAt = new Date();
    const sent = await sendSigned(this.sender, {
      url: sub.url,
      secret: this.box.open(sub.secretSealed, sub.id),
      eventType: delivery.eventType,
      deliveryId,
      body: event.payload,
    });
    // An activity retry, or a workflow reset that runs the attempts again, may log the same attempt again: the first
    // record stands, and the count moves only with a new record (a reset never takes attempt_count past the log).
    const logged = await em
      .createQueryBuilder(WebhookAttempt)
      .insert({ deliveryId, run, attempt, startedAt, statusCode: sent.statusCode || null, error: sent.error, latencyMs: sent.latencyMs, responseBody: sent.responseBody })
      .onConflict(['deliveryId', 'run', 'attempt'])
      .ignore();
    // raw SQL: the increment happens in the statement, so two attempts recorded at once never lose a count; it moves
    // only with a new log record, so a reset that runs the attempts again never takes attempt_count past the log.
    // eslint-disable-next-line no-restricted-syntax
    const counted = logged.affectedRows > 0 ? { attemptCount: sql`attempt_count + 1` } : {};
    await em.nativeUpdate(WebhookDelivery, { id: deliveryId, run }, { ...counted, lastStatusCode: sent.statusCode || null, lastError: sent.error, updatedAt: new Date() });
    return countWebhookAttempt({ outcome: sent.ok ? 'delivered' : 'failed_attempt', statusCode: sent.statusCode, error: sent.error, responseBody: sent.responseBody });
  }

  /**
   * Settles a run and updates its subscription; returns whether this call disabled the
   * subscription. `leaveOutbox`: the run also leaves the outbox (the dispatcher's first attempt delivered it).
   */
  async recordOutcome(deliveryId: string, run: number, delivered: boolean, error: string | null, opts: { leaveOutbox?: boolean } = {}): Promise<{ disabled: boolean }> {
    const em = this.em.fork();
    if (delivered) {
      const dispatched = opts.leaveOutbox ? ', dispatched_at = coalesce(dispatched_at, now()), inline_lease_until = null' : '';
      // raw SQL: a CTE settles the run and updates its subscription in one statement; the state move makes a repeat a no-op.
      // eslint-disable-next-line no-restricted-syntax
      await em.execute(
        `with d as (
           update webhook_deliveries set status = 'delivered', completed_at = now(), updated_at = now()${dispatched}
           where id = ? and run = ? and status = 'pending' returning subscription_id)
         update webhook_subscriptions s set consecutive_failures = 0, last_delivered_at = now(), updated_at = now()
         from d where s.id = d.subscription_id`,
        [deliveryId, run],
      );
      return { disabled: false };
    }
    const reason = `disabled after ${DISABLE_AFTER_FAILURES} consecutive failed deliveries; last error: ${error ?? 'unknown'}`;
    // raw SQL: a CTE with a row lock (for update of s): settles the run and counts the failure exactly under concurrent deliveries.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await em.execute<{ disabled_now: boolean }[]>(
      `with d as (
         update webhook_deliveries set status = 'failed', completed_at = now(), updated_at = now()
         where id = ? and run = ? and status = 'pending' returning subscription_id),
       prev as (
         select s.id, s.status as old_status from webhook_subscriptions s join d on s.id = d.subscription_id for update of s)
       update webhook_subscriptions s set
         consecutive_failures = s.consecutive_failures + 1,
         last_error = ?,
         last_failed_at = now(),
         status = case when s.status = 'active' and s.consecutive_failures + 1 >= ? then 'disabled' else s.status end,
         disabled_reason = case when s.status = 'active' and s.consecutive_failures + 1 >= ? then ? else s.disabled_reason end,
         updated_at = now()
       from prev where s.id = prev.id
       returning (prev.old_status = 'active' and s.status = 'disabled') as disabled_now`,
      [deliveryId, run, error, DISABLE_AFTER_FAILURES, DISABLE_AFTER_FAILURES, reason],
    );
    return { disabled: Boolean(rows[0]?.disabled_now) };
  }

  /**
   * Settles a run that will never be attempted again (its workflow was cancelled, or
   * terminated and found by the maintenance reconciliation): `failed` with the reason,
   * so the log never shows it pending for ever and POST …/retry works. Not a failed
   * delivery of the subscription: an operator stopped it, so its failure counter is left
   * alone. Only the run named moves, and only from pending.
   */
  async failRun(deliveryId: string, run: number, reason: string): Promise<boolean> {
    const now = new Date();
    const n = await this.em.fork().nativeUpdate(WebhookDelivery, { id: deliveryId, run, status: 'pending' }, { status: 'failed', lastError: reason, completedAt: now, updatedAt: now });
    return n > 0;
  }

  /** Runs handed to a workflow and still pending, untouched since `before`: the reconciliation asks Temporal about each. */
  async dispatchedPending(before: Date, limit: number): Promise<Array<{ id: string; run: number }>> {
    const rows = await this.em
      .fork()
      .find(WebhookDelivery, { status: 'pending', dispatchedAt: { $ne: null }, updatedAt: { $lt: before } }, { fields: ['id', 'run'], orderBy: { updatedAt: 'asc' }, limit });
    return rows.map((r) => ({ id: r.id, run: r.run }));
  }

  private async requireSubscription(em: EntityManager, workspaceId: string, subscriptionId: string): Promise<void> {
    if (!(await em.count(WebhookSubscription, { id: subscriptionId, workspaceId }))) {
      throw new DomainError('not_found', `No webhook subscription with id '${subscriptionId}' in this workspace`);
    }
  }

  async list(
    workspaceId: string,
    subscriptionId: string,
    q: { status?: DeliveryView['status']; limit: number; cursor?: string },
  ): Promise<{ deliveries: DeliveryView[]; next_cursor: string | null }> {
    const em = this.em.fork();
    await this.requireSubscription(em, workspaceId, subscriptionId);
    const page = await keysetFind(em, WebhookDelivery, q.status ? { subscriptionId, status: q.status } : { subscriptionId }, q);
    return { deliveries: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryView & { attempts: AttemptView[]; payload: unknown }> {
    const em = this.em.fork();
    const row = await this.deliveryRow(em, workspaceId, subscriptionId, deliveryId);
    const event = await em.findOneOrFail(WebhookEvent, { id: row.eventId });
    const attempts = await em.find(WebhookAttempt, { deliveryId }, { orderBy: { run: 'asc', attempt: 'asc' } });
    return {
      ...view(row),
      attempts: attempts.map((a) => ({
        run: a.run,
        attempt: a.attempt,
        started_at: iso(a.startedAt)!,
        status_code: a.statusCode ?? null,
        error: a.error ?? null,
        latency_ms: a.latencyMs,
        response_body: a.responseBody ?? null,
      })),
      payload: JSON.parse(event.payload),
    };
  }

  private async deliveryRow(em: EntityManager, workspaceId: string, subscriptionId: string, deliveryId: string, lock = false): Promise<IWebhookDelivery> {
    const row = await em.findOne(WebhookDelivery, { id: deliveryId, subscriptionId, workspaceId }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
    if (!row) throw new DomainError('not_found', `No delivery with id '${deliveryId}' for this subscription`);
    return row;
  }

  /** Re-delivers one delivery (same id, same body) as a new run of attempts. */
  /** A delivery's current run and status (null: no such delivery), whatever its workspace: for the reconciliation. */
  async current(id: string): Promise<{ run: number; status: string } | null> {
    const row = await this.em.fork().findOne(WebhookDelivery, { id }, { fields: ['run', 'status'] });
    return row ? { run: row.run, status: row.status } : null;
  }

  async retry(workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryView> {
    return this.em.fork().transactional(async (em) => {
      // Locked: a concurrent retry waits, then sees the run this one started and refuses.
      const row = await this.deliveryRow(em, workspaceId, subscriptionId, deliveryId, true);
      if (row.status === 'pending') throw new DomainError('delivery_in_progress', `Delivery '${deliveryId}' is still being attempted`);
      startNewRun(row);
      await em.flush();
      await this.webhooks.notifyOutbox(em, workspaceId);
      return view(row);
    });
  }

  /** A workspace's deliveries across subscriptions (failed ones by default), newest first, keyset-paged. */
  async listAll(
    workspaceId: string,
    q: DeliveryFilter & { status: DeliveryView['status']; limit: number; cursor?: string },
  ): Promise<{ deliveries: DeliveryView[]; next_cursor: string | null }> {
    const page = await keysetFind(this.em.fork(), WebhookDelivery, { workspaceId, status: q.status, ...this.window(q) }, q);
    return { deliveries: page.rows.map(view), next_cursor: page.next_cursor };
  }

  private window(f: DeliveryFilter) {
    const createdAt = { ...(f.since ? { $gte: f.since } : {}), ...(f.until ? { $lt: f.until } : {}) };
    return { ...(f.subscription_id ? { subscriptionId: f.subscription_id } : {}), ...(f.since || f.until ? { createdAt } : {}) };
  }

  /**
   * "Retry all": the workspace's failed deliveries matching the filter (oldest first, at most RETRY_ALL_MAX) back in
   * the outbox, each as a new run. Idempotent: a repeat finds them pending and moves nothing; `more` says another call
   * would move more. A subscription id of another workspace matches nothing.
   */
  async retryAll(workspaceId: string, f: DeliveryFilter): Promise<{ retried: number; delivery_ids: string[]; more: boolean }> {
    return this.em.fork().transactional(async (em) => {
      // Locked (skipping rows a concurrent call holds), so the ids returned are exactly the rows this call moves.
      const rows = await em.find(
        WebhookDelivery,
        { workspaceId, status: 'failed', ...this.window(f) },
        { lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE, orderBy: { createdAt: 'asc', id: 'asc' }, limit: RETRY_ALL_MAX + 1 },
      );
      const taken = rows.slice(0, RETRY_ALL_MAX);
      for (const row of taken) startNewRun(row);
      await em.flush();
      if (taken.length) await this.webhooks.notifyOutbox(em, workspaceId);
      return { retried: taken.length, delivery_ids: taken.map((r) => r.id), more: rows.length > RETRY_ALL_MAX };
    });
  }

  /**
   * The delivery "retry now" applies to: one in a retry run now (pending, handed to its workflow), which the caller
   * then signals; anything else is 409 `delivery_not_retrying`.
   */
  async retryNowTarget(workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryView> {
    const row = await this.deliveryRow(this.em.fork(), workspaceId, subscriptionId, deliveryId);
    if (row.status !== 'pending' || !row.dispatchedAt) {
      throw new DomainError('delivery_not_retrying', `Delivery '${deliveryId}' is not waiting between attempts (status ${row.status}${row.status === 'pending' ? ', first attempt under way' : ''})`);
    }
    return view(row);
  }

  /** Re-delivers every failed delivery of the subscription created in [since, until). */
  async replay(workspaceId: string, subscriptionId: string, since: Date, until: Date): Promise<{ replayed: number; delivery_ids: string[] }> {
    return this.em.fork().transactional(async (em) => {
      await this.requireSubscription(em, workspaceId, subscriptionId);
      // Locked, so the ids returned are exactly the rows this transaction moves back to pending.
      const rows = await em.find(
        WebhookDelivery,
        { subscriptionId, status: 'failed', createdAt: { $gte: since, $lt: until } },
        { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { createdAt: 'asc', id: 'asc' } },
      );
      for (const row of rows) startNewRun(row);
      await em.flush();
      if (rows.length) await this.webhooks.notifyOutbox(em, workspaceId);
      return { replayed: rows.length, delivery_ids: rows.map((r) => r.id) };
    });
  }
}
