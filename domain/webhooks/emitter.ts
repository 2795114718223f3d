import type { EntityManager } from '@mikro-orm/postgresql';
import { WebhookDelivery } from '../../db/entities';
import { newId } from '../../lib/ids';
import { OUTBOX_CHANNEL, type EventEnvelope, type SubscribableEvent } from './events';
import type { SubscriptionHealth } from './deliveries';

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

export interface EmittedEvent {
  eventId: string;
  deliveryIds: string[];
}

/**
 * The webhooks' shared rows: the outbox (events and their deliveries, written in the
 * caller's transaction by whatever emits an event) and the subscriptions' health read
 * from deliveries and attempts. Every method runs on the EntityManager it is given.
 */
export class WebhookRepository {
  /**
   * Records an event and its deliveries in the caller's transaction (the outbox), so the
   * business write and the event commit or vanish together. One delivery per active
   * subscription of the event type, unique per (event, subscription). The NOTIFY wakes
   * the worker's outbox dispatcher at commit; its periodic sweep covers a missed wake-up
   * or a crash between commit and dispatch.
   *
   * `em` must be inside a transaction (e.g. `em.transactional(tx => webhooks.emitEvent(tx, ...))`).
   */
  async emitEvent(em: EntityManager, workspaceId: string, type: SubscribableEvent, data: Record<string, unknown>): Promise<EmittedEvent> {
    return (await this.emitEvents(em, [{ workspaceId, type, data }]))[0];
  }

  /**
   * Several events at once (the msgapp webhook's batch of statuses), as `emitEvent` each, in two statements
   * whatever their number: the events' insert with the read of their subscriptions, then every delivery's
   * insert with one NOTIFY per workspace. Answers in the order given.
   */
  async emitEvents(em: EntityManager, events: Array<{ workspaceId: string; type: SubscribableEvent; data: Record<string, unknown> }>): Promise<EmittedEvent[]> {
    if (!events.length) return [];
    const createdAt = new Date().toISOString();
    const rows = events.map((e, n) => {
      const id = newId('evt');
      const envelope: EventEnvelope = { id, event: e.type, created_at: createdAt, data: e.data };
      return { n, id, workspace_id: e.workspaceId, type: e.type, payload: JSON.stringify(envelope), created_at: createdAt };
    });
    // raw SQL: the events' insert and the read of their subscriptions in one statement (rows as one JSON document), the
    // deliveries' insert and the NOTIFY in another; the ORM would send one statement per row.
    // eslint-disable-next-line no-restricted-syntax
    const subs = await em.execute<{ n: number; subscription_id: string }[]>(
      `with given as (select * from jsonb_to_recordset(?::jsonb) as e (n int, id text, workspace_id text, type text, payload text, created_at timestamptz)),
       inserted as (insert into webhook_events (id, workspace_id, type, payload, created_at) select id, workspace_id, type, payload, created_at from given)
       select g.n, s.id as subscription_id from given g
       join webhook_subscriptions s on s.workspace_id = g.workspace_id and s.status = 'active' and s.events @> array[g.type]::text[]
       order by g.n, s.id`,
      [JSON.stringify(rows)],
    );
    const emitted: EmittedEvent[] = rows.map((r) => ({ eventId: r.id, deliveryIds: [] }));
    const deliveries = subs.map((s) => {
      const r = rows[s.n];
      const id = newId('dlv');
      emitted[s.n].deliveryIds.push(id);
      return { id, workspace_id: r.workspace_id, event_id: r.id, subscription_id: s.subscription_id, event_type: r.type };
    });
    if (deliveries.length) {
      // eslint-disable-next-line no-restricted-syntax
      await em.execute(
        `with given as (select * from jsonb_to_recordset(?::jsonb) as d (id text, workspace_id text, event_id text, subscription_id text, event_type text)),
         inserted as (insert into webhook_deliveries (id, workspace_id, event_id, subscription_id, event_type, status) select id, workspace_id, event_id, subscription_id, event_type, 'pending' from given)
         select pg_notify(?, w.workspace_id) from (select distinct workspace_id from given) as w`,
        [JSON.stringify(deliveries), OUTBOX_CHANNEL],
      );
    }
    return emitted;
  }

  /** Wakes the worker's outbox dispatcher when the caller's transaction commits. */
  async notifyOutbox(em: EntityManager, workspaceId: string): Promise<void> {
    // raw SQL: pg_notify has no ORM form; it runs in the caller's transaction so the wake-up is sent at its commit.
    // eslint-disable-next-line no-restricted-syntax
    await em.execute('select pg_notify(?, ?)', [OUTBOX_CHANNEL, workspaceId]);
  }

  /**
   * The deliveries not settled, for the operator's gauges (app/metrics-backlog.ts): pending ones never handed out,
   * pending ones handed out (retrying), and when the oldest pending one was created. Each read on its own fork, all
   * at once; the partial index over pending rows answers them.
   */
  async deliveryBacklog(em: EntityManager): Promise<{ pending: number; retrying: number; oldestPendingAt: Date | null }> {
    const [pending, retrying, oldest] = await Promise.all([
      em.fork().count(WebhookDelivery, { status: 'pending', dispatchedAt: null }),
      em.fork().count(WebhookDelivery, { status: 'pending', dispatchedAt: { $ne: null } }),
      em.fork().findOne(WebhookDelivery, { status: 'pending' }, { orderBy: { createdAt: 'asc' }, fields: ['createdAt'] }),
    ]);
    return { pending, retrying, oldestPendingAt: oldest?.createdAt ?? null };
  }

  /**
   * The health of a workspace's subscriptions (all, or those named): what is failing since the last delivery and
   * what is retrying now. Read here, by the owner of the delivery and attempt tables, for the subscription views.
   */
  async subscriptionHealth(em: EntityManager, workspaceId: string, subscriptionId?: string): Promise<Map<string, SubscriptionHealth>> {
    // raw SQL: a lateral union over failed attempts and failed (or cancelled) deliveries since the subscription's last
    // delivery, with two counts, for every subscription of the workspace in one statement.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await em.execute<Array<{ id: string; retrying_now: number; failed_now: number; failing_since: Date | null; last_error: string | null; last_delivered_at: Date | null }>>(
      `select s.id, s.last_delivered_at,
         (select count(*)::int from webhook_deliveries d where d.subscription_id = s.id and d.status = 'pending' and d.dispatched_at is not null) as retrying_now,
         (select count(*)::int from webhook_deliveries d where d.workspace_id = s.workspace_id and d.subscription_id = s.id and d.status = 'failed') as failed_now,
         t.failing_since, t.last_error
       from webhook_subscriptions s
       left join lateral (
         select min(x.at) as failing_since, (array_agg(x.err order by x.at desc))[1] as last_error from (
           select a.started_at as at, a.error as err from webhook_deliveries d join webhook_attempts a on a.delivery_id = d.id
           where d.subscription_id = s.id and a.error is not null and a.started_at > coalesce(s.last_delivered_at, '-infinity'::timestamptz)
           union all
           select d.completed_at, d.last_error from webhook_deliveries d
           where d.subscription_id = s.id and d.status = 'failed' and d.completed_at > coalesce(s.last_delivered_at, '-infinity'::timestamptz)
         ) x
       ) t on true
       where s.workspace_id = ?${subscriptionId ? ' and s.id = ?' : ''}`,
      subscriptionId ? [workspaceId, subscriptionId] : [workspaceId],
    );
    return new Map(
      rows.map((r) => [
        r.id,
        { failing_since: iso(r.failing_since), retrying_now: r.retrying_now, failed_now: r.failed_now, last_error: r.last_error ?? null, last_delivered_at: iso(r.last_delivered_at) },
      ]),
    );
  }
}
