import { newId } from '../../lib/ids';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * Analytics against a seeded dataset with known counts: two workspaces (B's rows never
 * count for A), conversations on each channel around the night Europe/Berlin moves to
 * summer time (2026-03-29), replies, a handoff.
 */
let db: TestDatabase;
let t: TestApp;
let auth: Record<string, string>;
let authB: Record<string, string>;

const q = (sql: string, params: unknown[] = []) => db.orm.em.fork().execute(sql, params);

async function conversation(ws: string, channel: 'web' | 'msgapp' | 'voice', at: string, messages: Array<[role: 'user' | 'assistant' | 'human' | 'tool', secondsAfter: number]>, handoff = false) {
  const id = newId('conv');
  await q(`insert into conversations (id, workspace_id, channel, status, created_at, updated_at) values (?, ?, ?, 'open', ?, ?)`, [id, ws, channel, at, at]);
  for (const [role, s] of messages) {
    await q(`insert into chat_messages (id, workspace_id, conversation_id, role, text, created_at) values (?, ?, ?, ?, 'x', ?::timestamptz + make_interval(secs => ?))`, [newId('msg'), ws, id, role, at, s]);
  }
  if (handoff) await q(`insert into conversation_events (id, conversation_id, type, data) values (?, ?, 'handoff', '{}')`, [newId('evt'), id]);
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  const ws = await createWorkspace(db.orm);
  const wsB = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['analytics:read'])).key);
  authB = bearer((await createKey(t.services, wsB, ['analytics:read'])).key);
  // 23:30 UTC on the 28th is 00:30 on the 29th in Berlin: answered in 4 s.
  await conversation(ws, 'web', '2026-03-28T23:30:00Z', [['user', 0], ['tool', 1], ['assistant', 4]]);
  // Answered in 10 s, then handed over.
  await conversation(ws, 'msgapp', '2026-03-29T10:00:00Z', [['user', 0], ['assistant', 10]], true);
  // Never answered.
  await conversation(ws, 'web', '2026-03-30T08:00:00Z', [['user', 0]]);
  // Outside the window.
  await conversation(ws, 'web', '2026-04-02T08:00:00Z', [['user', 0], ['assistant', 1]]);
  // Workspace B: never counted for A.
  await conversation(wsB, 'voice', '2026-03-29T12:00:00Z', [['user', 0], ['assistant', 2]]);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const get = (url: string, headers = auth) => t.app.inject({ method: 'GET', url, headers });
const WINDOW = 'from=2026-03-28T00:00:00Z&to=2026-04-01T00:00:00Z';

test('summary: conversations, messages in and out (tool activity is not a message), handoffs, resolution, median first reply', async () => {
  const res = await get(`/api/v1/analytics/summary?${WINDOW}`);
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual({
    from: '2026-03-28T00:00:00.000Z',
    to: '2026-04-01T00:00:00.000Z',
    conversations: 3,
    messages_in: 3,
    messages_out: 2,
    handoffs: 1,
    handoff_rate: 0.3333,
    resolved_without_handoff: 1,
    resolution_rate: 0.3333,
    median_first_reply_seconds: 7,
    // No widget feedback in this dataset (test/api/widget-feedback.suite.ts counts it).
    feedback: { up: 0, down: 0, ratings: 0, average_rating: null },
  });
  // Workspace B sees only its own.
  expect((await get(`/api/v1/analytics/summary?${WINDOW}`, authB)).json()).toMatchObject({ conversations: 1, messages_in: 1, messages_out: 1, handoffs: 0, median_first_reply_seconds: 2 });
  // An empty window: zeros, null rates.
  expect((await get('/api/v1/analytics/summary?from=2020-01-01&to=2020-01-02')).json()).toMatchObject({ conversations: 0, handoff_rate: null, median_first_reply_seconds: null });
});

test('a window that is not whole hours counts its partial hours from the messages; a withdrawn message stops counting', async () => {
  const edge = (await get('/api/v1/analytics/summary?from=2026-03-28T23:30:02Z&to=2026-03-29T10:00:05Z')).json();
  expect(edge).toMatchObject({ conversations: 1, messages_in: 1, messages_out: 1 });
  const inside = (await get('/api/v1/analytics/summary?from=2026-03-29T10:00:00Z&to=2026-03-29T10:30:00Z')).json();
  expect(inside).toMatchObject({ conversations: 1, messages_in: 1, messages_out: 1 });
  // The API takes back a refused visitor message (a delete): the counts and the conversation's first message follow.
  const [late] = (await q(`select m.id, m.conversation_id from chat_messages m join conversations c on c.id = m.conversation_id where c.created_at = '2026-03-30T08:00:00Z'`)) as Array<{ id: string; conversation_id: string }>;
  await q('delete from chat_messages where id = ?', [late.id]);
  expect((await get(`/api/v1/analytics/summary?${WINDOW}`)).json()).toMatchObject({ conversations: 3, messages_in: 2 });
  expect(await q('select first_in_at from analytics_conversations where conversation_id = ?', [late.conversation_id])).toEqual([{ first_in_at: null }]);
  await q(`insert into chat_messages (id, workspace_id, conversation_id, role, text, created_at) select ?, workspace_id, id, 'user', 'x', created_at from conversations where id = ?`, [newId('msg'), late.conversation_id]);
  expect((await get(`/api/v1/analytics/summary?${WINDOW}`)).json()).toMatchObject({ messages_in: 3 });
});

test('conversations over time: every bucket, in the time zone asked, across the daylight-saving change', async () => {
  const utc = (await get(`/api/v1/analytics/conversations-over-time?${WINDOW}&interval=day`)).json();
  expect(utc.buckets).toEqual([
    { start: '2026-03-28T00:00:00+00:00', conversations: 1 },
    { start: '2026-03-29T00:00:00+00:00', conversations: 1 },
    { start: '2026-03-30T00:00:00+00:00', conversations: 1 },
    { start: '2026-03-31T00:00:00+00:00', conversations: 0 },
  ]);
  const berlin = (await get(`/api/v1/analytics/conversations-over-time?${WINDOW}&interval=day&tz=Europe/Berlin`)).json();
  expect(berlin).toMatchObject({ interval: 'day', tz: 'Europe/Berlin' });
  expect(berlin.buckets).toEqual([
    { start: '2026-03-28T00:00:00+01:00', conversations: 0 },
    { start: '2026-03-29T00:00:00+01:00', conversations: 2 },
    { start: '2026-03-30T00:00:00+02:00', conversations: 1 },
    { start: '2026-03-31T00:00:00+02:00', conversations: 0 },
    { start: '2026-04-01T00:00:00+02:00', conversations: 0 },
  ]);
  // A zone whose offset is not whole hours (India, +05:30): 23:30 UTC on the 28th is 05:00 on the 29th there.
  const kolkata = (await get(`/api/v1/analytics/conversations-over-time?${WINDOW}&interval=day&tz=Asia/Kolkata`)).json();
  expect(kolkata.buckets.map((b: { start: string; conversations: number }) => [b.start, b.conversations])).toEqual([
    ['2026-03-28T00:00:00+05:30', 0],
    ['2026-03-29T00:00:00+05:30', 2],
    ['2026-03-30T00:00:00+05:30', 1],
    ['2026-03-31T00:00:00+05:30', 0],
    ['2026-04-01T00:00:00+05:30', 0],
  ]);
  // Weeks start on Monday (the 23rd and the 30th).
  const weeks = (await get(`/api/v1/analytics/conversations-over-time?${WINDOW}&interval=week`)).json();
  expect(weeks.buckets).toEqual([
    { start: '2026-03-23T00:00:00+00:00', conversations: 2 },
    { start: '2026-03-30T00:00:00+00:00', conversations: 1 },
  ]);
  // Windows that are not whole 15-minute slots: their edges come from the rows, the rest from the rollup.
  const ragged = (await get('/api/v1/analytics/conversations-over-time?from=2026-03-29T09:50:00Z&to=2026-03-30T08:10:00Z&interval=hour')).json();
  expect(ragged.buckets.reduce((a: number, b: { conversations: number }) => a + b.conversations, 0)).toBe(2);
  const inside = (await get('/api/v1/analytics/conversations-over-time?from=2026-03-29T09:59:00Z&to=2026-03-29T10:07:00Z&interval=hour')).json();
  expect(inside.buckets.map((b: { conversations: number }) => b.conversations)).toEqual([0, 1]);
  const hours = (await get('/api/v1/analytics/conversations-over-time?from=2026-03-29T09:00:00Z&to=2026-03-29T12:00:00Z&interval=hour')).json();
  expect(hours.buckets.map((b: { conversations: number }) => b.conversations)).toEqual([0, 1, 0]);
});

test('channel breakdown: every channel, zeros too', async () => {
  expect((await get(`/api/v1/analytics/channel-breakdown?${WINDOW}`)).json().channels).toEqual([
    { channel: 'msgapp', conversations: 1, messages: 2 },
    { channel: 'web', conversations: 2, messages: 3 },
    { channel: 'voice', conversations: 0, messages: 0 },
  ]);
});

test('bad input is 400 in the envelope; the scope is required', async () => {
  for (const url of [
    '/api/v1/analytics/summary?from=yesterday',
    '/api/v1/analytics/summary?from=2026-04-02&to=2026-04-01',
    '/api/v1/analytics/summary?from=2020-01-01&to=2026-01-01',
    '/api/v1/analytics/conversations-over-time?tz=Mars/Olympus',
    '/api/v1/analytics/conversations-over-time?interval=minute',
    '/api/v1/analytics/conversations-over-time?from=2025-06-01&to=2026-06-01&interval=hour',
  ]) {
    const res = await get(url);
    expect([url, res.statusCode, res.json().error]).toEqual([url, 400, expect.stringMatching(/^invalid_request|validation/)]);
    expect(typeof res.json().message).toBe('string');
  }
  const ws = await createWorkspace(db.orm);
  const noScope = bearer((await createKey(t.services, ws, ['conversations:read'])).key);
  expect((await get('/api/v1/analytics/summary', noScope)).statusCode).toBe(403);
});

test('window bounds are RFC 3339 date-times or dates, as the document says; any of them answers, whatever the year', async () => {
  // Not RFC 3339: no offset, a date with a suffix. The document's `format` refuses them, so the server does.
  for (const bad of ['2026-03-29T10:00:00', '2026-03-29x', '2026-02-30']) {
    const res = await get(`/api/v1/analytics/summary?from=${encodeURIComponent(bad)}&to=2026-04-01`);
    expect([bad, res.statusCode]).toEqual([bad, 400]);
  }
  // Year 0 (clamped to year 1), years below 100 and local mean time (Berlin before 1893 was +00:53:28): every bucket start names its instant exactly,
  // with a four-digit year and the offset rounded to the minute (RFC 3339 offsets have no seconds).
  for (const [from, to, tz] of [
    ['0020-02-01T00:00:00Z', '0020-02-29T00:00:00Z', 'UTC'],
    ['1850-06-01', '1850-06-03', 'Europe/Berlin'],
    ['0000-12-30T00:00:00Z', '0001-01-03T00:00:00Z', 'America/New_York'],
  ]) {
    const res = await get(`/api/v1/analytics/conversations-over-time?from=${from}&to=${to}&tz=${tz}`);
    expect([from, res.statusCode]).toEqual([from, 200]);
    for (const b of res.json().buckets) expect(b.start).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/);
  }
  const berlin = (await get('/api/v1/analytics/conversations-over-time?from=1850-06-01&to=1850-06-03&tz=Europe/Berlin')).json();
  // Berlin's midnight in local mean time is 23:06:32 UTC the day before: each start parses to exactly that instant.
  expect(berlin.buckets.map((b: { start: string }) => new Date(b.start).toISOString())).toEqual(['1850-05-31T23:06:32.000Z', '1850-06-01T23:06:32.000Z', '1850-06-02T23:06:32.000Z']);
  expect(berlin.buckets[0].start).toBe('1850-05-31T23:59:32+00:53');
});
