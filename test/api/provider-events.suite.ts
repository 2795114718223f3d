import { newId } from '../../lib/ids';
import type { InboundMessage } from '../../providers/msgapp/cloud-api';
import { createWorkspace, testServices } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

// ProviderEventService's own guarantees, called directly (the webhook and the workflow are tested elsewhere).
let db: TestDatabase;
let c: Awaited<ReturnType<typeof testServices>>;
let ws: string;
let agentId: string;
const PHONE_NUMBER_ID = 'pn_events_1';
const q = <T = any>(sql: string, params: unknown[] = []) => c.em.fork().getConnection().execute<T[]>(sql, params);

beforeAll(async () => {
  db = await createTestDatabase();
  c = await testServices(db);
  ws = await createWorkspace(db.orm);
  agentId = newId('agt');
  await q(`insert into agents (id, workspace_id, name, status, spec) values (?, ?, 'A', 'published', ?::jsonb)`, [
    agentId,
    ws,
    JSON.stringify({ triggers: { msgapp: { number: '+15550001111', phone_number_id: PHONE_NUMBER_ID } } }),
  ]);
});
afterAll(async () => {
  await c.close();
  await db.drop();
});

const inbound = (id: string, from = '+15557770001'): InboundMessage =>
  ({
    providerMessageId: id,
    phoneNumberId: PHONE_NUMBER_ID,
    displayPhoneNumber: '+15550001111',
    from,
    profileName: 'Dana',
    kind: 'text',
    rawType: 'text',
    text: 'hello',
    timestamp: new Date('2026-01-01T00:00:00Z'),
  }) as InboundMessage;

test('an inbound message is accepted once; its party is a named customer and a conversation whose window is open; it is recorded once', async () => {
  const events = c.services.providerEvents;
  expect(await events.accept(inbound('wamid.1'))).toBe('accepted');
  expect(await events.accept(inbound('wamid.1'))).toBe('duplicate');
  expect(await events.accept({ ...inbound('wamid.x'), phoneNumberId: 'unclaimed' })).toBe('no_agent');
  expect(await events.undispatchedInbound(10)).toEqual([{ provider_message_id: 'wamid.1', workspace_id: ws, kind: 'text', from: '+15557770001', media: false }]);
  await events.markInboundDispatched('wamid.1');
  expect(await events.undispatchedInbound(10)).toEqual([]);

  const party = (await events.inboundParty('wamid.1'))!;
  expect(party).toMatchObject({ workspaceId: ws, agentId });
  expect(await events.inboundParty('wamid.1')).toEqual(party);
  const [customer] = await q('select name, phone from customers where id = ?', [party.customerId]);
  expect(customer).toEqual({ name: 'Dana', phone: '+15557770001' });
  const [conv] = await q('select channel, status, last_inbound_at from conversations where id = ?', [party.conversationId]);
  expect(conv).toMatchObject({ channel: 'msgapp', status: 'open', last_inbound_at: expect.anything() });

  const first = await events.recordInbound('wamid.1', party, {});
  expect(first.outcome).toBe('recorded');
  expect(await events.recordInbound('wamid.1', party, {})).toEqual({ outcome: 'duplicate', messageId: null });
  const [msg] = await q('select to_number, status, direction from messages where id = ?', [first.messageId]);
  expect(msg).toEqual({ to_number: '+15550001111', status: 'received', direction: 'inbound' });
  const [ev] = await q('select recorded_message_id from msgapp_inbound_events where provider_message_id = ?', ['wamid.1']);
  expect(ev.recorded_message_id).toBe(first.messageId);
  const timeline = await q('select type from conversation_events where conversation_id = ?', [party.conversationId]);
  expect(timeline).toEqual([{ type: 'message.received' }]);
});

test('statuses move forward only; a replay is not appended; a late one is kept without touching updated_at', async () => {
  const events = c.services.providerEvents;
  const party = (await events.inboundParty('wamid.1'))!;
  const id = newId('msg');
  await q(
    `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
     values (?, ?, ?, ?, ?, 'outbound', 'api', 'msgapp', '+15550001111', '+15557770001', 'text', 'hi', '{}'::jsonb, 'sent', 'wamid.out')`,
    [id, ws, party.conversationId, party.customerId, agentId],
  );
  const status = (s: 'sent' | 'delivered' | 'read' | 'failed', at: string, phoneNumberId = PHONE_NUMBER_ID) =>
    events.applyStatus({ providerMessageId: 'wamid.out', clientMessageId: id, phoneNumberId, status: s, timestamp: new Date(at), recipient: '+15557770001' });
  expect(await status('read', '2026-01-01T00:00:02Z', 'other')).toBe('unknown');
  expect(await status('read', '2026-01-01T00:00:02Z')).toBe('changed');
  expect(await status('read', '2026-01-01T00:00:02Z')).toBe('replayed');
  const [before] = await q('select updated_at from messages where id = ?', [id]);
  expect(await status('delivered', '2026-01-01T00:00:01Z')).toBe('kept');
  const [m] = await q('select status, status_history, updated_at from messages where id = ?', [id]);
  expect(m.status).toBe('read');
  expect(m.status_history.map((h: { status: string }) => h.status)).toEqual(['read', 'delivered']);
  expect(m.updated_at).toEqual(before.updated_at);
  const timeline = await q(`select data from conversation_events where conversation_id = ? and type = 'message.status'`, [party.conversationId]);
  expect(timeline).toEqual([{ data: { message_id: id, status: 'read' } }]);
});
