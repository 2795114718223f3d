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

test('a text message is accepted once and recorded by the webhook itself: a named customer, a conversation whose window is open, the message, its timeline and message.inbound', async () => {
  const events = c.services.providerEvents;
  expect(await events.accept(inbound('wamid.1'))).toBe('accepted');
  expect(await events.accept(inbound('wamid.1'))).toBe('duplicate');
  expect(await events.accept({ ...inbound('wamid.x'), phoneNumberId: 'unclaimed' })).toBe('no_agent');
  const [pending] = await events.undispatchedInbound(10);
  expect(pending).toEqual({
    provider_message_id: 'wamid.1',
    workspace_id: ws,
    kind: 'text',
    from: '+15557770001',
    media: false,
    recorded: { messageId: expect.stringMatching(/^msg_/), party: { workspaceId: ws, agentId, customerId: expect.stringMatching(/^cus_/), conversationId: expect.stringMatching(/^conv_/) } },
  });
  const { messageId, party } = pending.recorded! as { messageId: string; party: { customerId: string; conversationId: string } };
  await events.markInboundDispatched('wamid.1');
  expect(await events.undispatchedInbound(10)).toEqual([]);

  const [customer] = await q('select name, phone from customers where id = ?', [party.customerId]);
  expect(customer).toEqual({ name: 'Dana', phone: '+15557770001' });
  const [conv] = await q('select channel, status, last_inbound_at from conversations where id = ?', [party.conversationId]);
  expect(conv).toMatchObject({ channel: 'msgapp', status: 'open', last_inbound_at: expect.anything() });
  const [msg] = await q('select to_number, status, direction, conversation_id from messages where id = ?', [messageId]);
  expect(msg).toEqual({ to_number: '+15550001111', status: 'received', direction: 'inbound', conversation_id: party.conversationId });
  const [ev] = await q('select recorded_message_id from msgapp_inbound_events where provider_message_id = ?', ['wamid.1']);
  expect(ev.recorded_message_id).toBe(messageId);
  expect(await q('select type from conversation_events where conversation_id = ?', [party.conversationId])).toEqual([{ type: 'message.received' }]);
  expect(await q(`select 1 from webhook_events where type = 'message.inbound' and payload::jsonb #>> '{data,message_id}' = ?`, [messageId])).toHaveLength(1);
  // The workflow's steps find it recorded: the same party, and nothing recorded twice.
  expect(await events.inboundParty('wamid.1')).toEqual({ workspaceId: ws, agentId, customerId: party.customerId, conversationId: party.conversationId });
  expect(await events.recordInbound('wamid.1', pending.recorded!.party!, {})).toEqual({ outcome: 'duplicate', messageId: null });
});

test('a message with media is stored, not recorded, by the webhook: its workflow records it once, after the download', async () => {
  const events = c.services.providerEvents;
  const photo = { ...inbound('wamid.media', '+15557770002'), kind: 'image', rawType: 'image', text: null, media: { mediaId: 'media-1', mimeType: 'image/jpeg' } } as unknown as InboundMessage;
  expect(await events.accept(photo)).toBe('accepted');
  expect(await events.undispatchedInbound(10)).toEqual([{ provider_message_id: 'wamid.media', workspace_id: ws, kind: 'image', from: '+15557770002', media: true, recorded: null }]);
  expect(await q('select 1 from messages where provider_message_id = ?', ['wamid.media'])).toEqual([]);
  await events.markInboundDispatched('wamid.media');
  const party = (await events.inboundParty('wamid.media'))!;
  expect(await events.inboundParty('wamid.media')).toEqual(party);
  const first = await events.recordInbound('wamid.media', party, { error: 'the attachment could not be downloaded: gone' });
  expect(first.outcome).toBe('recorded');
  expect(await events.recordInbound('wamid.media', party, {})).toEqual({ outcome: 'duplicate', messageId: null });
  const [ev] = await q('select recorded_message_id from msgapp_inbound_events where provider_message_id = ?', ['wamid.media']);
  expect(ev.recorded_message_id).toBe(first.messageId);
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

test('a batch of status updates applies each as it would alone, after the ones before it: outcomes, histories, timeline and events', async () => {
  const events = c.services.providerEvents;
  const party = (await events.inboundParty('wamid.1'))!;
  const [a, b] = [newId('msg'), newId('msg')];
  for (const [id, wamid] of [[a, 'wamid.batch.a'], [b, null]] as const) {
    await q(
      `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
       values (?, ?, ?, ?, ?, 'outbound', 'api', 'msgapp', '+15550001111', '+15557770001', 'text', 'hi', '{}'::jsonb, 'sending', ?)`,
      [id, ws, party.conversationId, party.customerId, agentId, wamid],
    );
  }
  const at = (s: number) => new Date(Date.UTC(2026, 0, 3, 0, 0, s));
  const u = (wamid: string, status: 'sent' | 'delivered' | 'read' | 'failed', second: number, more: { clientMessageId?: string; phoneNumberId?: string; error?: string } = {}) => ({
    providerMessageId: wamid,
    phoneNumberId: more.phoneNumberId ?? PHONE_NUMBER_ID,
    status,
    timestamp: at(second),
    recipient: '+15557770001',
    ...(more.clientMessageId ? { clientMessageId: more.clientMessageId } : {}),
    ...(more.error ? { error: more.error } : {}),
  });
  const outcomes = await events.applyStatuses([
    u('wamid.batch.a', 'read', 3, { phoneNumberId: 'someone-else' }),
    u('wamid.batch.a', 'sent', 1),
    u('wamid.batch.a', 'delivered', 2),
    u('wamid.batch.a', 'delivered', 2),
    // Message b is found by the id we sent it with (biz_opaque_callback_data): the provider's id is not on record yet.
    u('wamid.batch.b', 'failed', 4, { clientMessageId: b, error: '(#131026) Message undeliverable' }),
    u('wamid.batch.a', 'read', 3),
    u('wamid.batch.a', 'sent', 1),
    u('wamid.batch.b', 'delivered', 5, { clientMessageId: b }),
    u('wamid.nobody', 'read', 3),
  ]);
  expect(outcomes).toEqual(['unknown', 'changed', 'changed', 'replayed', 'changed', 'changed', 'replayed', 'kept', 'unknown']);
  const rows = await q<{ id: string; status: string; error: string | null; status_history: Array<{ status: string }> }>(`select id, status, error, status_history from messages where id in (?, ?)`, [a, b]);
  const row = (id: string) => rows.find((r) => r.id === id)!;
  expect(row(a)).toMatchObject({ status: 'read', error: null });
  expect(row(a).status_history.map((h) => h.status)).toEqual(['sent', 'delivered', 'read']);
  expect(row(b)).toMatchObject({ status: 'failed', error: '(#131026) Message undeliverable' });
  expect(row(b).status_history.map((h) => h.status)).toEqual(['failed', 'delivered']);
  const timeline = await q<{ data: { message_id: string; status: string } }>(
    `select data from conversation_events where conversation_id = ? and type = 'message.status' and data->>'message_id' in (?, ?) order by created_at, id`,
    [party.conversationId, a, b],
  );
  expect(timeline.map((t) => `${t.data.message_id === a ? 'a' : 'b'}:${t.data.status}`)).toEqual(['a:sent', 'a:delivered', 'b:failed', 'a:read']);
  const emitted = await q<{ payload: string }>(`select payload from webhook_events where type = 'message.status' and payload::jsonb #>> '{data,message_id}' in (?, ?) order by created_at, id`, [a, b]);
  expect(emitted.map((e) => JSON.parse(e.payload).data).map((d: { message_id: string; status: string }) => `${d.message_id === a ? 'a' : 'b'}:${d.status}`).sort()).toEqual(['a:delivered', 'a:read', 'a:sent', 'b:failed']);
  expect(await events.applyStatuses([])).toEqual([]);
});

test.each([
  ['applied one by one', 'service'],
  ["through the webhook's batches", 'webhook'],
] as const)('concurrent, out-of-order and repeated status callbacks (%s) never move a message backwards: every callback is in the history once, the status ends at the highest, and each message.status event moves forward', async (_how, via) => {
  const events = c.services.providerEvents;
  const webhook = c.services.providerWebhook;
  const apply = (u: Parameters<typeof events.applyStatus>[0]) => (via === 'service' ? events.applyStatus(u) : webhook.receive({ statuses: [u], inbound: [] }, { warn: () => undefined }));
  const party = (await events.inboundParty('wamid.1'))!;
  const ids = [newId('msg'), newId('msg')];
  for (const [i, id] of ids.entries()) {
    await q(
      `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
       values (?, ?, ?, ?, ?, 'outbound', 'api', 'msgapp', '+15550001111', '+15557770001', 'text', 'hi', '{}'::jsonb, 'sending', ?)`,
      [id, ws, party.conversationId, party.customerId, agentId, `wamid.race.${via}.${i}`],
    );
  }
  const at = (s: number) => new Date(Date.UTC(2026, 0, 2, 0, 0, s));
  const update = (i: number, status: 'sent' | 'delivered' | 'read' | 'failed', second: number) =>
    apply({ providerMessageId: `wamid.race.${via}.${i}`, clientMessageId: ids[i], phoneNumberId: PHONE_NUMBER_ID, status, timestamp: at(second), recipient: '+15557770001' });
  // Message 0: sent, delivered, read, each sent twice by the provider, all at once in an order that is not theirs.
  // Message 1: the same with a failure at the end (final: nothing after it counts, and it counts after read).
  const calls = [
    ...(['read', 'sent', 'delivered', 'read', 'delivered', 'sent'] as const).map((s) => () => update(0, s, { sent: 1, delivered: 2, read: 3 }[s])),
    ...(['read', 'failed', 'sent', 'delivered', 'failed'] as const).map((s) => () => update(1, s, { sent: 1, delivered: 2, read: 3, failed: 4 }[s])),
  ];
  for (let round = 0; round < 3; round++) await Promise.all([...calls].sort(() => Math.random() - 0.5).map((call) => call()));
  const rows = await q<{ id: string; status: string; status_history: Array<{ status: string; at: string }> }>(`select id, status, status_history from messages where id in (?, ?)`, ids);
  const row = (id: string) => rows.find((r) => r.id === id)!;
  expect(row(ids[0]).status).toBe('read');
  expect(row(ids[1]).status).toBe('failed');
  // Each distinct callback (status and time) once, however often and in whatever order it came.
  expect(row(ids[0]).status_history.map((h) => h.status).sort()).toEqual(['delivered', 'read', 'sent']);
  expect(row(ids[1]).status_history.map((h) => h.status).sort()).toEqual(['delivered', 'failed', 'read', 'sent']);
  const RANK: Record<string, number> = { sent: 1, delivered: 2, read: 3, failed: 4 };
  for (const id of ids) {
    const emitted = (await q<{ payload: string }>(`select payload from webhook_events where type = 'message.status' and payload::jsonb #>> '{data,message_id}' = ?`, [id])).map(
      (e) => JSON.parse(e.payload).data.status as string,
    );
    // An event per change only: no status twice (a repeat or a late one emits nothing), the highest the message's.
    expect(emitted.length).toBeGreaterThan(0);
    expect(new Set(emitted).size).toBe(emitted.length);
    expect(emitted.reduce((a, b) => (RANK[b] > RANK[a] ? b : a))).toBe(row(id).status);
  }
});
