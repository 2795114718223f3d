import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../crypto/secret-box';
import { ApiError } from '../errors';
import { Filters, keysetPage } from '../pagination';
import { DISABLE_AFTER_FAILURES, OUTBOX_CHANNEL } from './events';
import { sendSigned, type SenderSettings } from './sender';

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

/** What the dispatcher needs to start a delivery workflow. */
export interface DispatchItem {
  id: string;
  run: number;
  workspace_id: string;
  subscription_id: string;
  event_type: string;
}

export interface AttemptResult {
  /** `gone`: deleted; `settled`: this run already ended (a duplicate workflow start). */
  outcome: 'delivered' | 'failed_attempt' | 'gone' | 'settled';
  statusCode: number;
  error: string | null;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  subscription_id: string;
  status: DeliveryView['status'];
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function view(r: DeliveryRow): DeliveryView {
  return {
    id: r.id,
    event_id: r.event_id,
    event_type: r.event_type,
    subscription_id: r.subscription_id,
    status: r.status,
    attempt_count: r.attempt_count,
    last_status_code: r.last_status_code,
    last_error: r.last_error,
    created_at: iso(r.created_at)!,
    updated_at: iso(r.updated_at)!,
    completed_at: iso(r.completed_at),
  };
}

/** Opaque keyset cursor over (created_at desc, id desc): new rows never shift a page. */

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
  ) {}

  async undispatched(limit: number): Promise<DispatchItem[]> {
    return this.em.fork().execute<DispatchItem[]>(
      `select id, run, workspace_id, subscription_id, event_type from webhook_deliveries
       where dispatched_at is null order by created_at, id limit ?`,
      [limit],
    );
  }

  async markDispatched(id: string, run: number): Promise<void> {
    await this.em.fork().execute('update webhook_deliveries set dispatched_at = now() where id = ? and run = ? and dispatched_at is null', [id, run]);
  }

  /** One attempt: one signed POST of the stored body, logged. */
  async attempt(deliveryId: string, run: number, attempt: number): Promise<AttemptResult> {
    const em = this.em.fork();
    const [row] = await em.execute<{ status: string; run: number; url: string; sub_id: string; secret_sealed: string; payload: string; event_type: string }[]>(
      `select d.status, d.run, s.url, s.id as sub_id, s.secret_sealed, e.payload, d.event_type
       from webhook_deliveries d
       join webhook_subscriptions s on s.id = d.subscription_id
       join webhook_events e on e.id = d.event_id
       where d.id = ?`,
      [deliveryId],
    );
    if (!row) return { outcome: 'gone', statusCode: 0, error: null };
    if (row.status !== 'pending' || row.run !== run) return { outcome: 'settled', statusCode: 0, error: null };
    const startedAt = new Date();
    const sent = await sendSigned(this.sender, {
      url: row.url,
      secret: this.box.open(row.secret_sealed, row.sub_id),
      eventType: row.event_type,
      deliveryId,
      body: row.payload,
    });
    await em.execute(
      `insert into webhook_attempts (delivery_id, run, attempt, started_at, status_code, error, latency_ms, response_body)
       values (?, ?, ?, ?, ?, ?, ?, ?) on conflict do nothing`,
      [deliveryId, run, attempt, startedAt, sent.statusCode || null, sent.error, sent.latencyMs, sent.responseBody],
    );
    await em.execute(
      `update webhook_deliveries set attempt_count = attempt_count + 1, last_status_code = ?, last_error = ?, updated_at = now()
       where id = ? and run = ?`,
      [sent.statusCode || null, sent.error, deliveryId, run],
    );
    return { outcome: sent.ok ? 'delivered' : 'failed_attempt', statusCode: sent.statusCode, error: sent.error };
  }

  /** Settles a run and updates its subscription; returns whether this call disabled the subscription. */
  async recordOutcome(deliveryId: string, run: number, delivered: boolean, error: string | null): Promise<{ disabled: boolean }> {
    const em = this.em.fork();
    if (delivered) {
      await em.execute(
        `with d as (
           update webhook_deliveries set status = 'delivered', completed_at = now(), updated_at = now()
           where id = ? and run = ? and status = 'pending' returning subscription_id)
         update webhook_subscriptions s set consecutive_failures = 0, last_delivered_at = now(), updated_at = now()
         from d where s.id = d.subscription_id`,
        [deliveryId, run],
      );
      return { disabled: false };
    }
    const reason = `disabled after ${DISABLE_AFTER_FAILURES} consecutive failed deliveries; last error: ${error ?? 'unknown'}`;
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

  private async requireSubscription(em: EntityManager, workspaceId: string, subscriptionId: string): Promise<void> {
    const rows = await em.execute('select 1 from webhook_subscriptions where id = ? and workspace_id = ?', [subscriptionId, workspaceId]);
    if (!rows.length) throw new ApiError(404, 'not_found', `No webhook subscription with id '${subscriptionId}' in this workspace`);
  }

  async list(
    workspaceId: string,
    subscriptionId: string,
    q: { status?: DeliveryView['status']; limit: number; cursor?: string },
  ): Promise<{ deliveries: DeliveryView[]; next_cursor: string | null }> {
    const em = this.em.fork();
    await this.requireSubscription(em, workspaceId, subscriptionId);
    const filters = new Filters('subscription_id = ?', subscriptionId);
    if (q.status) filters.add('status = ?', q.status);
    const page = await keysetPage<DeliveryRow>(em, 'select * from webhook_deliveries', filters, q);
    return { deliveries: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryView & { attempts: AttemptView[]; payload: unknown }> {
    const em = this.em.fork();
    const row = await this.deliveryRow(em, workspaceId, subscriptionId, deliveryId);
    const [{ payload }] = await em.execute<{ payload: string }[]>('select payload from webhook_events where id = ?', [row.event_id]);
    const attempts = await em.execute<(Omit<AttemptView, 'started_at'> & { started_at: Date })[]>(
      'select run, attempt, started_at, status_code, error, latency_ms, response_body from webhook_attempts where delivery_id = ? order by run, attempt',
      [deliveryId],
    );
    return { ...view(row), attempts: attempts.map((a) => ({ ...a, started_at: iso(a.started_at)! })), payload: JSON.parse(payload) };
  }

  private async deliveryRow(em: EntityManager, workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryRow> {
    const [row] = await em.execute<DeliveryRow[]>('select * from webhook_deliveries where id = ? and subscription_id = ? and workspace_id = ?', [
      deliveryId,
      subscriptionId,
      workspaceId,
    ]);
    if (!row) throw new ApiError(404, 'not_found', `No delivery with id '${deliveryId}' for this subscription`);
    return row;
  }

  /** Re-delivers one delivery (same id, same body) as a new run of attempts. */
  async retry(workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryView> {
    return this.em.fork().transactional(async (em) => {
      const row = await this.deliveryRow(em, workspaceId, subscriptionId, deliveryId);
      if (row.status === 'pending') throw new ApiError(409, 'delivery_in_progress', `Delivery '${deliveryId}' is still being attempted`);
      const [updated] = await em.execute<DeliveryRow[]>(
        `update webhook_deliveries set status = 'pending', run = run + 1, dispatched_at = null, completed_at = null, updated_at = now()
         where id = ? and status <> 'pending' returning *`,
        [deliveryId],
      );
      if (!updated) throw new ApiError(409, 'delivery_in_progress', `Delivery '${deliveryId}' is still being attempted`);
      await em.execute('select pg_notify(?, ?)', [OUTBOX_CHANNEL, workspaceId]);
      return view(updated);
    });
  }

  /** Re-delivers every failed delivery of the subscription created in [since, until). */
  async replay(workspaceId: string, subscriptionId: string, since: Date, until: Date): Promise<{ replayed: number; delivery_ids: string[] }> {
    return this.em.fork().transactional(async (em) => {
      await this.requireSubscription(em, workspaceId, subscriptionId);
      const rows = await em.execute<{ id: string }[]>(
        `update webhook_deliveries set status = 'pending', run = run + 1, dispatched_at = null, completed_at = null, updated_at = now()
         where subscription_id = ? and status = 'failed' and created_at >= ? and created_at < ? returning id`,
        [subscriptionId, since, until],
      );
      if (rows.length) await em.execute('select pg_notify(?, ?)', [OUTBOX_CHANNEL, workspaceId]);
      return { replayed: rows.length, delivery_ids: rows.map((r) => r.id) };
    });
  }
}
