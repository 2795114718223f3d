import { newId } from '../../lib/ids';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, signedInUser, type Browser } from '../support/console';
import { startTestWorker } from '../support/temporal';

/**
 * The console's analytics of people's times (GET /api/console/analytics/handling, issue 31 part 8) on the real app,
 * database and Temporal: a conversation taken and handed back through the inbox reports the wait and handle times its
 * timeline recorded; what the trigger on conversation_events keeps for re-queues, passes and holds; workspaces, roles
 * and API keys.
 */
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let wsA: string;
let wsB: string;
let ownerA: Browser;
let agentA: Browser;
let viewerA: Browser;
let ownerB: Browser;

beforeAll(async () => {
  db = await createTestDatabase();
  tw = await startTestWorker(db);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
    config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN },
    serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN },
  });
  wsA = await createWorkspace(db.orm, 'Workspace A');
  wsB = await createWorkspace(db.orm, 'Workspace B');
  [ownerA, agentA, viewerA, ownerB] = await Promise.all([
    signedInUser(t.app, t.services, wsA, 'owner'),
    signedInUser(t.app, t.services, wsA, 'agent'),
    signedInUser(t.app, t.services, wsA, 'viewer'),
    signedInUser(t.app, t.services, wsB, 'owner'),
  ]);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await db?.drop();
});

const q = async <T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> => (await db.orm.em.fork().execute(sql, params)) as unknown as T[];
const handling = (b: Browser, query: string) => t.app.inject({ method: 'GET', url: `/api/console/analytics/handling?${query}`, headers: asBrowser(b) });
const act = (b: Browser, id: string, action: object) => t.app.inject({ method: 'POST', url: `/api/console/inbox/conversations/${id}/actions`, headers: asBrowser(b), payload: action });

/** A voice conversation (no widget to tell) that has waited for a person since `queuedSecondsAgo`, started at `at`. */
async function waiting(ws: string, queuedSecondsAgo: number, at = new Date().toISOString(), isTest = false): Promise<string> {
  const id = newId('conv');
  await q(
    `insert into conversations (id, workspace_id, channel, status, needs_human, queued_at, is_test, created_at, updated_at)
     values (?, ?, 'voice', 'open', true, now() - make_interval(secs => ?), ?, ?, ?)`,
    [id, ws, queuedSecondsAgo, isTest, at, at],
  );
  return id;
}

/** Timeline entries as the inbox writes them (domain/conversations/inbox.ts), a second apart (the backfill replays them in that order). */
async function entries(id: string, list: Array<[type: string, data: Record<string, unknown>]>): Promise<void> {
  for (const [i, [type, data]] of list.entries()) {
    await q(`insert into conversation_events (id, conversation_id, type, data, created_at) values (?, ?, ?, ?::jsonb, clock_timestamp() + make_interval(secs => ?))`, [newId('evt'), id, type, JSON.stringify(data), i]);
  }
}

const DAY = 86_400_000;
const TODAY = `from=${new Date(Date.now() - DAY).toISOString()}&to=${new Date(Date.now() + DAY).toISOString()}`;
const NONE = { handled_conversations: 0, median_wait_seconds: null, p90_wait_seconds: null, median_handle_seconds: null, p90_handle_seconds: null };

test('taken over and handed back through the inbox: the endpoint reports the wait and handle times the timeline recorded; another workspace sees none of them', async () => {
  expect((await handling(ownerA, TODAY)).json()).toMatchObject(NONE);
  const id = await waiting(wsA, 90);
  expect((await act(agentA, id, { kind: 'take' })).statusCode).toBe(200);
  // Held for two minutes (its start moved back, as a long conversation would have it).
  await q(`update conversations set assigned_at = assigned_at - interval '120 seconds' where id = ?`, [id]);
  expect((await act(agentA, id, { kind: 'hand_back' })).statusCode).toBe(200);
  const timeline = await q<{ type: string; data: { wait_ms?: number; handle_ms?: number } }>(`select type, data from conversation_events where conversation_id = ? order by created_at`, [id]);
  const wait = timeline.find((e) => e.type === 'inbox.assigned')!.data.wait_ms!;
  const handle = timeline.find((e) => e.type === 'inbox.handed_back')!.data.handle_ms!;
  expect(wait).toBeGreaterThanOrEqual(90_000);
  expect(handle).toBeGreaterThanOrEqual(120_000);

  const res = await handling(ownerA, TODAY);
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual({
    from: expect.any(String),
    to: expect.any(String),
    handled_conversations: 1,
    median_wait_seconds: wait / 1000,
    p90_wait_seconds: wait / 1000,
    median_handle_seconds: handle / 1000,
    p90_handle_seconds: handle / 1000,
  });
  // Workspace B's owner: none of A's.
  const other = await handling(ownerB, TODAY);
  expect(other.statusCode).toBe(200);
  expect(other.json()).toMatchObject(NONE);
}, 30_000);

test('per conversation: a re-queue counts only the time back in the queue, a pass counts the previous holder, one held now is in the waits only; test conversations count nowhere', async () => {
  const at = '2026-03-10T12:00:00Z';
  const window = 'from=2026-03-10&to=2026-03-11';
  // Queued, taken after 60 s, re-queued after 30 s held (keeping its place), taken again 10 s later (100 s since
  // queued), passed to a teammate 20 s after that (120 s since queued), handed back after 5 s.
  const requeued = await waiting(wsA, 0, at);
  await entries(requeued, [
    ['inbox.assigned', { how: 'take', wait_ms: 60_000 }],
    ['inbox.requeued', { reason: 'offline', handle_ms: 30_000 }],
    ['inbox.assigned', { how: 'round_robin', wait_ms: 100_000 }],
    ['inbox.assigned', { how: 'assign', from: 'usr_x', wait_ms: 120_000 }],
    ['inbox.handed_back', { handle_ms: 5_000 }],
  ]);
  // Handed back from the queue before anyone took it (that wait is nobody's: not counted); queued again, taken after
  // 15 s, closed after 40 s held.
  const closed = await waiting(wsA, 0, at);
  await entries(closed, [
    ['inbox.handed_back', { handle_ms: null }],
    ['inbox.assigned', { how: 'take', wait_ms: 15_000 }],
    ['inbox.closed', { reason: 'resolved', handle_ms: 40_000 }],
  ]);
  // Held now: its wait counts, its handle time is not final.
  const held = await waiting(wsA, 0, at);
  await entries(held, [['inbox.assigned', { how: 'take', wait_ms: 200_000 }]]);
  // A console test conversation: no analytics row, nothing counted.
  const test = await waiting(wsA, 0, at, true);
  await entries(test, [
    ['inbox.assigned', { how: 'take', wait_ms: 999_000 }],
    ['inbox.handed_back', { handle_ms: 999_000 }],
  ]);

  const rows = await q<{ conversation_id: string; human_assignments: number; human_wait_ms: string; human_handle_ms: string; human_held: boolean }>(
    `select conversation_id, human_assignments, human_wait_ms, human_handle_ms, human_held from analytics_conversations where conversation_id in (?, ?, ?, ?)`,
    [requeued, closed, held, test],
  );
  const of = (id: string) => rows.find((r) => r.conversation_id === id);
  // Waits 60 + 10 s; held 30 + 20 + 5 s.
  expect(of(requeued)).toMatchObject({ human_assignments: 3, human_wait_ms: '70000', human_handle_ms: '55000', human_held: false });
  expect(of(closed)).toMatchObject({ human_assignments: 1, human_wait_ms: '15000', human_handle_ms: '40000', human_held: false });
  expect(of(held)).toMatchObject({ human_assignments: 1, human_wait_ms: '200000', human_handle_ms: '0', human_held: true });
  expect(of(test)).toBeUndefined();

  // Waits 15, 70, 200 s; handle times 40, 55 s (the held one left out). percentile_cont interpolates.
  expect((await handling(viewerA, window)).json()).toEqual({
    from: '2026-03-10T00:00:00.000Z',
    to: '2026-03-11T00:00:00.000Z',
    handled_conversations: 3,
    median_wait_seconds: 70,
    p90_wait_seconds: 174,
    median_handle_seconds: 47.5,
    p90_handle_seconds: 53.5,
  });
  // The backfill (the upgrade, a bulk load) rebuilds the same from the timeline.
  await q(`update analytics_conversations set human_assignments = 0, human_wait_ms = 0, human_handle_ms = 0, human_held = false where workspace_id = ?`, [wsA]);
  await q(`select analytics_backfill()`);
  expect((await handling(viewerA, window)).json()).toMatchObject({ handled_conversations: 3, median_wait_seconds: 70, p90_wait_seconds: 174, median_handle_seconds: 47.5 });
});

test('a viewer (analytics:read) reads; an agent (no analytics:read) is 403; an API key or no session is 401; a bad window is 400', async () => {
  expect((await handling(viewerA, TODAY)).statusCode).toBe(200);
  const agent = await handling(agentA, TODAY);
  expect(agent.statusCode).toBe(403);
  expect(agent.json()).toMatchObject({ error: 'insufficient_scope', message: expect.any(String), required_scope: 'analytics:read' });
  const key = bearer((await createKey(t.services, wsA, ['analytics:read'])).key);
  const withKey = await t.app.inject({ method: 'GET', url: `/api/console/analytics/handling?${TODAY}`, headers: key });
  expect(withKey.statusCode).toBe(401);
  expect(withKey.json()).toEqual({ error: 'not_signed_in', message: expect.any(String) });
  expect((await t.app.inject({ method: 'GET', url: `/api/console/analytics/handling?${TODAY}` })).statusCode).toBe(401);
  const bad = await handling(viewerA, 'from=2026-03-11&to=2026-03-10');
  expect(bad.statusCode).toBe(400);
  expect(bad.json()).toEqual({ error: 'invalid_request', message: 'from: must be before to' });
});
