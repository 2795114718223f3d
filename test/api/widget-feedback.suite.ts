import { newId } from '../../lib/ids';
import { userHash } from '../../domain/widget/sites';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';

/**
 * Widget feedback on the real app and database: a visitor's thumb on an agent reply and
 * rating of the conversation, stored once per subject and replaced; refused for anything
 * but an agent reply of the visitor's own conversation; read back by analytics (list and
 * summary) only in its own workspace.
 */
let db: TestDatabase;
let t: TestApp;
const ORIGIN = 'https://shop.example';

let wsA: string;
let authA: Record<string, string>;
let authB: Record<string, string>;
let agentA: string;
let siteA: { site_id: string; site_secret: string };
let siteA2: { site_id: string; site_secret: string };
let siteB: { site_id: string; site_secret: string };
/** An anonymous visitor's conversation on site A with two agent replies, their own message and a human agent's. */
let conv: string;
let reply1: string;
let reply2: string;
let visitorMsg: string;
let humanMsg: string;
/** Another conversation on site A, with its own reply. */
let otherConv: string;
let otherReply: string;

type Site = { site_id: string };
const headers = (site: Site) => ({ 'x-concierge-site': site.site_id, origin: ORIGIN });
const post = (site: Site, path: 'feedback' | 'rating' | 'init', payload: object) => t.app.inject({ method: 'POST', url: `/api/public/widget/${path}`, headers: headers(site), payload });
const get = (url: string, auth = authA) => t.app.inject({ method: 'GET', url, headers: auth });

async function message(ws: string, conversationId: string, role: 'user' | 'assistant' | 'human', text: string): Promise<string> {
  const id = newId('msg');
  await t.services.transcript.append({ id, workspaceId: ws, conversationId, role, text });
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  wsA = await createWorkspace(db.orm);
  const wsB = await createWorkspace(db.orm);
  agentA = await publishedWebAgent(t.app, bearer((await createKey(t.services, wsA, ['workflows:write', 'workflows:publish'])).key), ORIGIN);
  const agentB = await publishedWebAgent(t.app, bearer((await createKey(t.services, wsB, ['workflows:write', 'workflows:publish'])).key), ORIGIN);
  authA = bearer((await createKey(t.services, wsA, ['analytics:read'])).key);
  authB = bearer((await createKey(t.services, wsB, ['analytics:read'])).key);
  siteA = await t.services.sites.create(wsA, agentA, [ORIGIN]);
  siteA2 = await t.services.sites.create(wsA, agentA, [ORIGIN]);
  siteB = await t.services.sites.create(wsB, agentB, [ORIGIN]);

  conv = (await post(siteA, 'init', {})).json().conversation_id;
  visitorMsg = await message(wsA, conv, 'user', 'Where is my parcel?');
  reply1 = await message(wsA, conv, 'assistant', 'It left the warehouse today.');
  humanMsg = await message(wsA, conv, 'human', 'I checked: it arrives tomorrow.');
  reply2 = await message(wsA, conv, 'assistant', 'Anything else?');
  otherConv = (await post(siteA, 'init', {})).json().conversation_id;
  expect(otherConv).not.toBe(conv);
  otherReply = await message(wsA, otherConv, 'assistant', 'Hello!');
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

describe('POST /api/public/widget/feedback', () => {
  test('a thumb is stored (201), replaced by the next one with its comment (200, one row), and cleared by rating null', async () => {
    const first = await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply1, rating: 'down', comment: '  Not what I asked.  ' });
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({ conversation_id: conv, reply_id: reply1, rating: 'down', comment: 'Not what I asked.', updated_at: expect.any(String) });

    const again = await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply1, rating: 'up' });
    expect(again.statusCode).toBe(200);
    // Replaced whole: no comment sent, none kept.
    expect(again.json()).toMatchObject({ rating: 'up', comment: null });
    let rows = (await get(`/api/v1/analytics/feedback?conversation_id=${conv}&kind=reply`)).json().feedback;
    expect(rows).toEqual([
      {
        id: expect.stringMatching(/^fbk_/),
        kind: 'reply',
        conversation_id: conv,
        reply_id: reply1,
        site_id: siteA.site_id,
        agent_id: agentA,
        rating: 'up',
        score: null,
        comment: null,
        created_at: expect.any(String),
        updated_at: again.json().updated_at,
      },
    ]);
    // The row keeps its id and first time: its place in the list does not move.
    expect(Date.parse(rows[0].updated_at)).toBeGreaterThanOrEqual(Date.parse(rows[0].created_at));

    const cleared = await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply1, rating: null });
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json()).toMatchObject({ rating: null, comment: null });
    rows = (await get(`/api/v1/analytics/feedback?conversation_id=${conv}&kind=reply`)).json().feedback;
    expect(rows).toEqual([]);
    // Given again after clearing: a new first feedback.
    expect((await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply1, rating: 'up' })).statusCode).toBe(201);
  });

  test('an unknown reply id, the visitor\'s own message and a human agent\'s message are 404 not_found in the error envelope', async () => {
    for (const id of ['msg_000000000000000000000000', visitorMsg, humanMsg]) {
      const res = await post(siteA, 'feedback', { conversation_id: conv, reply_id: id, rating: 'up' });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'not_found', message: expect.stringContaining('reply_id') });
    }
  });

  test("another conversation's reply is refused (404), and nothing is stored on either conversation", async () => {
    const res = await post(siteA, 'feedback', { conversation_id: conv, reply_id: otherReply, rating: 'down' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toBe('not_found');
    expect((await get(`/api/v1/analytics/feedback?conversation_id=${otherConv}`)).json().feedback).toEqual([]);
  });

  test("a conversation of another site (same workspace and agent, or another workspace) is 404; a verified visitor's is theirs alone", async () => {
    for (const site of [siteA2, siteB]) {
      const res = await post(site, 'feedback', { conversation_id: conv, reply_id: reply2, rating: 'up' });
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toBe('not_found');
    }
    const ctx = { external_id: 'buyer-7', user_hash: userHash(siteA.site_secret, siteA.site_id, 'buyer-7') };
    const verified = (await post(siteA, 'init', { user_context: ctx })).json().conversation_id;
    const answer = await message(wsA, verified, 'assistant', 'Your order shipped.');
    const anonymous = await post(siteA, 'feedback', { conversation_id: verified, reply_id: answer, rating: 'up' });
    expect(anonymous.statusCode).toBe(403);
    expect(anonymous.json().error).toBe('identity_verification_required');
    const owner = await post(siteA, 'feedback', { conversation_id: verified, reply_id: answer, rating: 'up', user_context: ctx });
    expect(owner.statusCode).toBe(201);
    const rating = await post(siteA, 'rating', { conversation_id: verified, score: 4 });
    expect(rating.statusCode).toBe(403);
  });

  test('a comment longer than 1,000 characters is 400 naming it; a field the body does not have is 400; an Origin not on the list is 403', async () => {
    const long = await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply2, rating: 'up', comment: 'x'.repeat(1001) });
    expect(long.statusCode).toBe(400);
    expect(long.json()).toMatchObject({ error: 'invalid_request', message: expect.stringContaining('comment') });
    const extra = await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply2, rating: 'up', html: '<b>x</b>' });
    expect(extra.statusCode).toBe(400);
    const foreign = await t.app.inject({ method: 'POST', url: '/api/public/widget/feedback', headers: { ...headers(siteA), origin: 'https://evil.example' }, payload: { conversation_id: conv, reply_id: reply2, rating: 'up' } });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.json().error).toBe('origin_not_allowed');
    // Exactly 1,000 characters is taken, as text.
    const max = await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply2, rating: 'down', comment: '<b>'.padEnd(1000, 'y') });
    expect(max.statusCode).toBe(201);
    expect(max.json().comment).toBe('<b>'.padEnd(1000, 'y'));
    expect((await post(siteA, 'feedback', { conversation_id: conv, reply_id: reply2, rating: null })).statusCode).toBe(200);
  });
});

describe('POST /api/public/widget/rating', () => {
  test('a 1-to-5 rating is stored (201), replaced (200, one per conversation), allowed once the conversation is closed, cleared by score null', async () => {
    const c = (await post(siteA, 'init', {})).json().conversation_id;
    const first = await post(siteA, 'rating', { conversation_id: c, score: 2, comment: 'Slow.' });
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({ conversation_id: c, score: 2, comment: 'Slow.', updated_at: expect.any(String) });
    // The visitor starts a new conversation: the old one closes, and may still be rated.
    const fresh = await t.app.inject({ method: 'POST', url: '/api/public/widget/conversations/new', headers: headers(siteA), payload: { conversation_id: c } });
    expect(fresh.statusCode).toBe(201);
    expect((await t.services.conversations.get(wsA, c)).status).toBe('closed');
    const again = await post(siteA, 'rating', { conversation_id: c, score: 5, comment: '   ' });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ score: 5, comment: null });
    const rows = (await get(`/api/v1/analytics/feedback?conversation_id=${c}`)).json().feedback;
    expect(rows).toEqual([expect.objectContaining({ kind: 'conversation', reply_id: null, rating: null, score: 5, comment: null, site_id: siteA.site_id, agent_id: agentA })]);

    for (const score of [0, 6, 3.5, '4']) {
      const bad = await post(siteA, 'rating', { conversation_id: c, score });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().message).toMatch(/score/);
    }
    expect((await post(siteA, 'rating', { conversation_id: c, score: null })).json()).toMatchObject({ score: null, comment: null });
    expect((await get(`/api/v1/analytics/feedback?conversation_id=${c}`)).json().feedback).toEqual([]);
    expect((await post(siteA, 'rating', { conversation_id: 'conv_000000000000000000000000', score: 3 })).statusCode).toBe(404);
  });
});

describe('analytics: feedback list and summary, per workspace', () => {
  let ws: string;
  let auth: Record<string, string>;
  let site: { site_id: string; site_secret: string };
  let agent: string;

  beforeAll(async () => {
    // A workspace of its own, so the counts are exact.
    ws = await createWorkspace(db.orm);
    agent = await publishedWebAgent(t.app, bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key), ORIGIN);
    auth = bearer((await createKey(t.services, ws, ['analytics:read'])).key);
    site = await t.services.sites.create(ws, agent, [ORIGIN]);
    const thumbs: Array<'up' | 'down'> = ['up', 'up', 'down', 'up', 'down'];
    const scores = [5, 4, 2];
    for (let i = 0; i < 3; i++) {
      const c = (await post(site, 'init', {})).json().conversation_id;
      for (const rating of thumbs.slice(i * 2, i * 2 + 2)) {
        const r = await message(ws, c, 'assistant', `answer ${rating}`);
        expect((await post(site, 'feedback', { conversation_id: c, reply_id: r, rating })).statusCode).toBe(201);
      }
      expect((await post(site, 'rating', { conversation_id: c, score: scores[i] })).statusCode).toBe(201);
    }
  });

  test('summary counts thumbs and ratings of the window, with the mean score; another workspace counts none of them', async () => {
    const res = await get('/api/v1/analytics/summary', auth);
    expect(res.statusCode).toBe(200);
    expect(res.json().feedback).toEqual({ up: 3, down: 2, ratings: 3, average_rating: 3.67 });
    expect((await get('/api/v1/analytics/summary', authB)).json().feedback).toEqual({ up: 0, down: 0, ratings: 0, average_rating: null });
    // A window before any of it.
    expect((await get('/api/v1/analytics/summary?from=2020-01-01&to=2020-02-01', auth)).json().feedback).toEqual({ up: 0, down: 0, ratings: 0, average_rating: null });
  });

  test('the list pages newest first with a cursor, filters by kind, rating, score, agent and time, and needs analytics:read', async () => {
    const all: Array<{ id: string; created_at: string }> = [];
    let cursor: string | null = null;
    do {
      const page = await get(`/api/v1/analytics/feedback?limit=3${cursor ? `&cursor=${cursor}` : ''}`, auth);
      expect(page.statusCode).toBe(200);
      expect(page.json().feedback.length).toBeLessThanOrEqual(3);
      all.push(...page.json().feedback);
      cursor = page.json().next_cursor;
    } while (cursor);
    expect(all).toHaveLength(8);
    expect(new Set(all.map((r) => r.id)).size).toBe(8);
    const times = all.map((r) => Date.parse(r.created_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    const count = async (q: string) => (await get(`/api/v1/analytics/feedback?${q}`, auth)).json().feedback.length;
    expect(await count('rating=up')).toBe(3);
    expect(await count('rating=down')).toBe(2);
    expect(await count('kind=conversation')).toBe(3);
    expect(await count('kind=reply')).toBe(5);
    expect(await count('score=4')).toBe(1);
    expect(await count(`agent_id=${agent}`)).toBe(8);
    expect(await count(`agent_id=${agentA}`)).toBe(0);
    expect(await count(`site_id=${site.site_id}`)).toBe(8);
    expect(await count('until=2020-01-01T00:00:00Z')).toBe(0);
    const oldest = all[all.length - 1].created_at;
    expect(await count(`since=${encodeURIComponent(oldest)}`)).toBe(8);
    expect(await count(`until=${encodeURIComponent(oldest)}`)).toBe(0);

    const noScope = bearer((await createKey(t.services, ws, ['conversations:read'])).key);
    const refused = await get('/api/v1/analytics/feedback', noScope);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toBe('insufficient_scope');
  });

  test("two tenants: workspace B's key lists none of A's feedback, even asking for A's conversation, site or agent", async () => {
    expect((await get('/api/v1/analytics/feedback', auth)).json().feedback.length).toBe(8);
    for (const q of ['', `conversation_id=${conv}`, `site_id=${site.site_id}`, `agent_id=${agent}`]) {
      const res = await get(`/api/v1/analytics/feedback?${q}`, authB);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ feedback: [], next_cursor: null });
    }
    // And A's first workspace sees its own, never this one's.
    const mine = (await get('/api/v1/analytics/feedback?limit=200')).json().feedback as Array<{ site_id: string }>;
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((r) => r.site_id === siteA.site_id)).toBe(true);
  });
});

test('the widget rate limit per site and client address applies to feedback and ratings (429 with Retry-After)', async () => {
  const limited = await startTestApp({ orm: db.orm, databaseUrl: db.url, widgetLimits: { perSiteClient: 2, sendsPerConversation: 1_000, refusalsPerAddress: 1_000 } });
  try {
    const send = () => limited.app.inject({ method: 'POST', url: '/api/public/widget/feedback', headers: headers(siteA), payload: { conversation_id: conv, reply_id: reply2, rating: 'up' } });
    expect((await send()).statusCode).toBeLessThan(300);
    expect((await send()).statusCode).toBe(200);
    const third = await limited.app.inject({ method: 'POST', url: '/api/public/widget/rating', headers: headers(siteA), payload: { conversation_id: conv, score: 3 } });
    expect(third.statusCode).toBe(429);
    expect(third.json().error).toBe('rate_limited');
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
  } finally {
    await limited.close();
  }
});
