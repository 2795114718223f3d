import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../ids';
import { OUTBOX_CHANNEL, type EventEnvelope, type SubscribableEvent } from './events';

export interface EmittedEvent {
  eventId: string;
  deliveryIds: string[];
}

/**
 * Records an event and its deliveries in the caller's transaction (the outbox), so the
 * business write and the event commit or vanish together. One delivery per active
 * subscription of the event type, unique per (event, subscription). The NOTIFY wakes
 * the worker's outbox dispatcher at commit; its periodic sweep covers a missed wake-up
 * or a crash between commit and dispatch.
 *
 * `em` must be inside a transaction (e.g. `em.transactional(tx => emitEvent(tx, ...))`).
 */
export async function emitEvent(em: EntityManager, workspaceId: string, type: SubscribableEvent, data: Record<string, unknown>): Promise<EmittedEvent> {
  const eventId = newId('evt');
  const createdAt = new Date();
  const envelope: EventEnvelope = { id: eventId, event: type, created_at: createdAt.toISOString(), data };
  await em.execute('insert into webhook_events (id, workspace_id, type, payload, created_at) values (?, ?, ?, ?, ?)', [
    eventId,
    workspaceId,
    type,
    JSON.stringify(envelope),
    createdAt,
  ]);
  const subs = await em.execute<{ id: string }[]>(
    `select id from webhook_subscriptions where workspace_id = ? and status = 'active' and ? = any(events) order by id`,
    [workspaceId, type],
  );
  const deliveryIds = subs.map(() => newId('dlv'));
  if (subs.length) {
    const values = subs.map(() => `(?, ?, ?, ?, ?, 'pending')`).join(', ');
    await em.execute(
      `insert into webhook_deliveries (id, workspace_id, event_id, subscription_id, event_type, status) values ${values}`,
      subs.flatMap((s, i) => [deliveryIds[i], workspaceId, eventId, s.id, type]),
    );
    await em.execute('select pg_notify(?, ?)', [OUTBOX_CHANNEL, workspaceId]);
  }
  return { eventId, deliveryIds };
}
