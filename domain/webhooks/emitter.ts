import type { EntityManager } from '@mikro-orm/postgresql';
import { WebhookDelivery, WebhookEvent, WebhookSubscription } from '../../db/entities';
import { newId } from '../../lib/ids';
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
  await em.insert(WebhookEvent, { id: eventId, workspaceId, type, payload: JSON.stringify(envelope), createdAt });
  const subs = await em.find(WebhookSubscription, { workspaceId, status: 'active', events: { $contains: [type] } }, { orderBy: { id: 'asc' }, fields: ['id'] });
  const deliveryIds = subs.map(() => newId('dlv'));
  if (subs.length) {
    await em.insertMany(
      WebhookDelivery,
      subs.map((s, i) => ({ id: deliveryIds[i], workspaceId, eventId, subscriptionId: s.id, eventType: type, status: 'pending' as const })),
    );
    await notifyOutbox(em, workspaceId);
  }
  return { eventId, deliveryIds };
}

/** Wakes the worker's outbox dispatcher when the caller's transaction commits. */
export async function notifyOutbox(em: EntityManager, workspaceId: string): Promise<void> {
  // raw SQL: pg_notify has no ORM form; it runs in the caller's transaction so the wake-up is sent at its commit.
  // eslint-disable-next-line no-restricted-syntax
  await em.execute('select pg_notify(?, ?)', [OUTBOX_CHANNEL, workspaceId]);
}
