import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { testLogFile } from '../support/secret-log';
import { upgrade } from '../support/socket';
import { Client } from 'pg';
import WebSocket from 'ws';
import { buildApp } from '../../api/app';
import { loadConfig } from '../../app/config';
import { CHAT_CHANNEL, ChatFrames, type ChatFrame, type ChatNotice } from '../../domain/chat/frames';
import { ChatTranscript } from '../../domain/chat/transcript';
import { openDatabase, type Orm } from '../../db/orm';
import { newId } from '../../lib/ids';
import { createRequestLimits } from '../../lib/ratelimit';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { answerOf } from '../support/http-error';

const ORIGIN = 'https://shop.example';
const OTHER_ORIGIN = 'https://other.example';
const PING_MS = 200;

let db: TestDatabase;
/** Instance A: pings every 30 s, so any close seen here within a test came from a recheck notice. */
let a: TestApp;
/** Instance B: its own ORM, hub and LISTEN connection on the same database; pings every 200 ms. */
let b: TestApp;
let ormB: Orm;
let baseA: string;
let baseB: string;
let ws: string;
let agentId: string;
let otherAgentId: string;
let site: string;
let transcript: ChatTranscript;

async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

async function publishedAgent(auth: Record<string, string>, name: string): Promise<string> {
  const res = await a.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name, instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN] } } },
  });
  const id = res.json().id as string;
  await a.app.inject({ method: 'POST', url: `/api/v1/agents/${id}/publish`, headers: auth });
  return id;
}

const newSite = async (origins = [ORIGIN], agent = agentId) => (await a.services.sites.create(ws, agent, origins)).site_id;

async function newConversation(siteId = site, origin = ORIGIN): Promise<string> {
  const res = await a.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': siteId, origin }, payload: {} });
  expect(res.statusCode).toBe(200);
  return res.json().conversation_id;
}

/**
 * A connected socket with its received frames, or the HTTP refusal of its handshake. The hand-off state every socket
 * is told first (`{type: handoff, active}`, test/api/human-handoff.suite.ts) is kept apart: these tests count the rest.
 */
class Socket {
  readonly frames: Array<{ at: number; frame: Record<string, unknown> }> = [];
  handoff: Record<string, unknown> | null = null;
  private readonly waiters: Array<() => void> = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data));
      if (this.handoff === null && frame.type === 'handoff') {
        this.handoff = frame;
        return;
      }
      this.frames.push({ at: Date.now(), frame });
      this.waiters.splice(0).forEach((w) => w());
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  /** Frame number `index` (from 0), waiting up to `ms` for it. */
  async frame(index: number, ms = 3_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + ms;
    while (this.frames.length <= index) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no frame #${index} within ${ms} ms (got ${JSON.stringify(this.frames.map((f) => f.frame))})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.frames[index].frame;
  }

  async closedWithin(ms = 3_000): Promise<{ code: number; reason: string }> {
    return Promise.race([this.closed, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`socket still open after ${ms} ms`)), ms).unref())]);
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }
}

type Handshake = { socket: Socket; status?: undefined; body?: undefined } | { socket?: undefined; status: number; body: { error: string; message: string } };

/** `origin: null` sends no Origin header. */
async function connect(base: string, query: Record<string, string | undefined>, origin: string | null = ORIGIN): Promise<Handshake> {
  const params = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined));
  const h = await upgrade(`${base}/api/chat/connect?${params}`, origin, (ws) => new Socket(ws));
  return h.ws ? { socket: h.ws } : { status: h.status, body: h.body };
}

async function open(base: string, conversationId: string, opts: { siteId?: string; origin?: string; after?: string } = {}): Promise<Socket> {
  const h = await connect(base, { site_id: opts.siteId ?? site, conversation_id: conversationId, after: opts.after }, opts.origin ?? ORIGIN);
  if (!h.socket) throw new Error(`handshake refused: ${h.status} ${JSON.stringify(h.body)}`);
  return h.socket;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  db = await createTestDatabase();
  a = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  ormB = await openDatabase(db.url);
  b = await startTestApp({ orm: ormB, databaseUrl: db.url, chatPingIntervalMs: PING_MS });
  [baseA, baseB] = [await listen(a), await listen(b)];
  ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(a.services, ws, ['workflows:write', 'workflows:publish'])).key);
  agentId = await publishedAgent(auth, 'Shop helper');
  otherAgentId = await publishedAgent(auth, 'Other helper');
  site = await newSite();
  transcript = new ChatTranscript(db.orm.em);
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await ormB?.close();
  await db?.drop();
});

describe('rule 1: site_id and conversation_id are required before the upgrade', () => {
  test.each([
    ['site_id missing', { conversation_id: 'conv_x' }],
    ['conversation_id missing', { site_id: 'site_x' }],
    ['both missing (400 comes before the site check)', {}],
  ])('%s → HTTP 400 invalid_request, no socket', async (_name, query) => {
    const h = await connect(baseA, query);
    expect(h.status).toBe(400);
    expect(h.body).toEqual({ error: 'invalid_request', message: expect.any(String) });
  });

  test('a plain GET (no upgrade) that passes the checks → 426 upgrade_required', async () => {
    const conv = await newConversation();
    const res = await a.app.inject({ method: 'GET', url: `/api/chat/connect?site_id=${site}&conversation_id=${conv}`, headers: { origin: ORIGIN } });
    expect(res.statusCode).toBe(426);
    expect(res.json()).toEqual({ error: 'upgrade_required', message: expect.any(String) });
    expect(res.headers.upgrade).toBe('websocket');
  });

  test('an app built without a hub answers 503 socket_unavailable', async () => {
    const bare = await buildApp({ services: a.services, limits: await createRequestLimits({ kind: 'memory' }, 1000, 1000), bodyLimitBytes: 1024 * 1024 });
    try {
      await bare.listen({ port: 0, host: '127.0.0.1' });
      const h = await connect(`ws://127.0.0.1:${(bare.server.address() as AddressInfo).port}`, { site_id: site, conversation_id: await newConversation() });
      expect(h.status).toBe(503);
      expect(h.body?.error).toBe('socket_unavailable');
    } finally {
      await bare.close();
    }
  });
});

describe('rule 2: site, Origin and conversation are checked before the upgrade', () => {
  test.each([
    ['unknown site', 'site_000000000000000000000000', ORIGIN, 'unknown_site'],
    ['origin not on the list', null, 'https://evil.example', 'origin_not_allowed'],
    ['origin that merely starts like an allowed one', null, 'https://shop.example.evil.example', 'origin_not_allowed'],
    ['missing Origin', null, null, 'origin_not_allowed'],
  ])('%s → HTTP 403 (site %s, Origin %s) %s', async (_name, siteId, origin, code) => {
    const conv = await newConversation();
    const h = await connect(baseA, { site_id: siteId ?? site, conversation_id: conv }, origin);
    expect(h.status).toBe(403);
    expect(h.body).toEqual({ error: code, message: expect.any(String) });
  });

  test('suspended site → HTTP 403 site_suspended', async () => {
    const s = await newSite();
    const conv = await newConversation(s);
    await a.services.sites.setStatus(s, 'suspended');
    const h = await connect(baseA, { site_id: s, conversation_id: conv });
    expect(h.status).toBe(403);
    expect(h.body?.error).toBe('site_suspended');
  });

  test('a conversation of another agent, an unknown one, or a closed one → HTTP 403 forbidden', async () => {
    const foreignSite = await newSite([ORIGIN], otherAgentId);
    const foreign = await newConversation(foreignSite);
    const closed = await newConversation();
    await db.orm.em.fork().execute(`update conversations set status = 'closed', closed_at = now() where id = ?`, [closed]);
    for (const conv of [foreign, 'conv_000000000000000000000000', closed]) {
      const h = await connect(baseA, { site_id: site, conversation_id: conv });
      expect({ conv, status: h.status, error: h.body?.error }).toEqual({ conv, status: 403, error: 'forbidden' });
    }
    // The same foreign conversation opens through its own site.
    (await open(baseA, foreign, { siteId: foreignSite })).ws.close();
  });

  test('Origin matches case-insensitively', async () => {
    const s = await open(baseA, await newConversation(), { origin: 'HTTPS://SHOP.EXAMPLE' });
    expect(s.open).toBe(true);
    s.ws.close();
  });
});

describe('rule 3: bound to one conversation, receive-only', () => {
  test('client messages are ignored and the socket stays open; a frame for another conversation is not delivered', async () => {
    const mine = await newConversation();
    const other = await newConversation(site);
    const s = await open(baseA, mine);
    s.ws.send(JSON.stringify({ type: 'join', conversation_id: other }));
    s.ws.send('not even json');
    s.ws.send(Buffer.from([0, 1, 2]));
    await new ChatFrames(db.orm.em).publish(other, { type: 'reply_delta', reply_id: 'msg_other', text: 'for someone else' });
    await new ChatFrames(db.orm.em).publish(mine, { type: 'reply_delta', reply_id: 'msg_mine', text: 'for me' });
    // Notices arrive in publish order on the one LISTEN connection: had the first been delivered, it would come first.
    expect(await s.frame(0)).toEqual({ type: 'reply_delta', reply_id: 'msg_mine', text: 'for me' });
    expect(s.frames).toHaveLength(1);
    expect(s.open).toBe(true);
    s.ws.close();
  });

  test('every frame type is forwarded as published', async () => {
    const conv = await newConversation();
    const s = await open(baseA, conv);
    const frames = [
      { type: 'reply', reply_id: 'msg_1', text: 'Hello', suggested_actions: ['Track my order'] },
      { type: 'suggested_actions', reply_id: 'msg_1', suggested_actions: ['Track my order'] },
      { type: 'error', reply_id: 'msg_2', code: 'workflow_execution_failed', text: 'Sorry' },
      { type: 'task_status', task_key: 'refund', label: 'Refund', status: 'running' },
    ] satisfies ChatFrame[];
    for (const f of frames) await new ChatFrames(db.orm.em).publish(conv, f);
    for (let i = 0; i < frames.length; i++) expect(await s.frame(i)).toEqual(frames[i]);
    s.ws.close();
  });
});

describe('rule 4: lost authorization closes the socket with 1008', () => {
  test('the site is suspended → 1008 at once (recheck notice, not the 30 s tick)', async () => {
    const s0 = await newSite();
    const s = await open(baseA, await newConversation(s0), { siteId: s0 });
    await a.services.sites.setStatus(s0, 'suspended');
    expect((await s.closedWithin(2_000)).code).toBe(1008);
  });

  test('the origin is removed from the site → 1008 for that origin only', async () => {
    const s0 = await newSite([ORIGIN, OTHER_ORIGIN]);
    const conv = await newConversation(s0);
    const fromOther = await open(baseA, conv, { siteId: s0, origin: OTHER_ORIGIN });
    const fromShop = await open(baseA, conv, { siteId: s0, origin: ORIGIN });
    expect(await a.services.sites.setOrigins(s0, [ORIGIN])).toEqual({ site_id: s0, allowed_origins: [ORIGIN] });
    expect((await fromOther.closedWithin(2_000)).code).toBe(1008);
    await sleep(200);
    expect(fromShop.open).toBe(true);
    fromShop.ws.close();
  });

  test('setOrigins validates like create', async () => {
    await expect(answerOf(a.services.sites.setOrigins(site, ['https://shop.example/path']))).resolves.toMatchObject({ status: 400, code: 'invalid_request' });
    await expect(answerOf(a.services.sites.setOrigins(site, []))).resolves.toMatchObject({ status: 400, code: 'invalid_request' });
    await expect(answerOf(a.services.sites.setOrigins('site_000000000000000000000000', [ORIGIN]))).resolves.toMatchObject({ status: 404 });
  });

  test('the conversation is closed (+ recheck notice) → 1008; another conversation of the site stays open', async () => {
    const conv = await newConversation();
    const other = await newConversation(site);
    const s = await open(baseA, conv);
    const keep = await open(baseA, other);
    await db.orm.em.fork().execute(`update conversations set status = 'closed', closed_at = now() where id = ?`, [conv]);
    await new ChatFrames(db.orm.em).recheck({ conversation: conv });
    expect((await s.closedWithin(2_000)).code).toBe(1008);
    await sleep(200);
    expect(keep.open).toBe(true);
    keep.ws.close();
  });

  test('a change made without a notice is caught on the next ping tick', async () => {
    const s0 = await newSite();
    const s = await open(baseB, await newConversation(s0), { siteId: s0 });
    await db.orm.em.fork().execute(`update sites set status = 'suspended' where id = ?`, [s0]);
    expect((await s.closedWithin(PING_MS * 10)).code).toBe(1008);
  });
});

describe('rule 5: keep-alive', () => {
  test('a ping frame arrives at the configured interval', async () => {
    const s = await open(baseB, await newConversation());
    const first = await s.frame(0, PING_MS * 5);
    const second = await s.frame(1, PING_MS * 5);
    expect([first, second]).toEqual([{ type: 'ping' }, { type: 'ping' }]);
    const gap = s.frames[1].at - s.frames[0].at;
    expect(gap).toBeGreaterThanOrEqual(PING_MS * 0.5);
    expect(gap).toBeLessThan(PING_MS * 3);
    s.ws.close();
  });
});

describe('cross-process fan-out through LISTEN/NOTIFY', () => {
  test('one frame published through B reaches sockets held by A and by B; one through A reaches B', async () => {
    const conv = await newConversation();
    const onA = await open(baseA, conv);
    const onB = await open(baseB, conv);
    await new ChatFrames(ormB.em).publish(conv, { type: 'reply', reply_id: 'msg_fan', text: 'from B' });
    expect(await onA.frame(0)).toEqual({ type: 'reply', reply_id: 'msg_fan', text: 'from B' });
    const seenOnB = async (match: Record<string, unknown>) => {
      for (let i = 0; ; i++) {
        const f = await onB.frame(i);
        if (f.type !== 'ping') return expect(f).toEqual(match);
      }
    };
    await seenOnB({ type: 'reply', reply_id: 'msg_fan', text: 'from B' });
    expect(a.chatHub.size).toBeGreaterThanOrEqual(1);
    onA.ws.close();
    onB.ws.close();
  });
});

describe('a reply too big for NOTIFY travels as a ref', () => {
  test('a 20 kB reply is published as {k:ref} and arrives whole, with its non-empty extras', async () => {
    const conv = await newConversation();
    const s = await open(baseA, conv);
    const observer = new Client({ connectionString: db.url });
    const notices: ChatNotice[] = [];
    await observer.connect();
    try {
      observer.on('notification', (n) => notices.push(JSON.parse(n.payload!)));
      await observer.query(`listen ${CHAT_CHANNEL}`);
      const text = 'All about your order. '.repeat(1000);
      const { row } = await transcript.append({
        id: newId('msg'),
        workspaceId: ws,
        conversationId: conv,
        role: 'assistant',
        text,
        extras: { suggested_actions: ['Track it'], cards: [] },
      });
      await new ChatFrames(db.orm.em).publish(conv, { type: 'reply', reply_id: row.id, text, suggested_actions: ['Track it'] }, row.id);
      expect(await s.frame(0)).toEqual({ type: 'reply', reply_id: row.id, text, suggested_actions: ['Track it'] });
      // The observer's copy of the notice may arrive after the socket's frame (two connections).
      for (let i = 0; i < 100 && notices.length === 0; i++) await sleep(20);
      expect(notices).toEqual([{ k: 'ref', c: conv, m: row.id }]);
    } finally {
      await observer.end();
      s.ws.close();
    }
  });

  test('a ref naming a message of another conversation is dropped', async () => {
    const conv = await newConversation();
    const other = await newConversation(site);
    const { row } = await transcript.append({ id: newId('msg'), workspaceId: ws, conversationId: other, role: 'assistant', text: 'not yours' });
    const s = await open(baseA, conv);
    await db.orm.em.getConnection().execute('select pg_notify(?, ?)', [CHAT_CHANNEL, JSON.stringify({ k: 'ref', c: conv, m: row.id })]);
    await new ChatFrames(db.orm.em).publish(conv, { type: 'reply_delta', reply_id: 'msg_after', text: 'next' });
    expect(await s.frame(0)).toEqual({ type: 'reply_delta', reply_id: 'msg_after', text: 'next' });
    s.ws.close();
  });
});

describe('catch-up with after', () => {
  test('replies written after the given message come first, in order, then live frames', async () => {
    const conv = await newConversation();
    const add = (role: 'user' | 'assistant' | 'human' | 'tool', text: string, more: object = {}) =>
      transcript.append({ id: newId('msg'), workspaceId: ws, conversationId: conv, role, text, ...more }).then((r) => r.row.id);
    const m1 = await add('user', 'Where is my order?');
    const m2 = await add('assistant', 'It ships today.', { extras: { cards: [{ title: 'Order 42' }], charts: [] }, attachments: [{ file_key: 'k1' }] });
    await add('tool', 'lookup_order(42)');
    const m4 = await add('human', 'Hi, Sam here.', { unsolicited: true });
    await add('user', 'Thanks');
    const m6 = await add('assistant', 'You are welcome.');

    const s = await open(baseA, conv, { after: m1 });
    await new ChatFrames(db.orm.em).publish(conv, { type: 'reply_delta', reply_id: 'msg_live', text: 'live' });
    expect(await s.frame(0)).toEqual({ type: 'reply', reply_id: m2, text: 'It ships today.', cards: [{ title: 'Order 42' }], attachments: [{ file_key: 'k1' }] });
    expect(await s.frame(1)).toEqual({ type: 'reply', reply_id: m4, text: 'Hi, Sam here.', author: 'human', unsolicited: true });
    expect(await s.frame(2)).toEqual({ type: 'reply', reply_id: m6, text: 'You are welcome.' });
    expect(await s.frame(3)).toEqual({ type: 'reply_delta', reply_id: 'msg_live', text: 'live' });
    s.ws.close();

    // Up to date: nothing to catch up, live frames only.
    const current = await open(baseA, conv, { after: m6 });
    await new ChatFrames(db.orm.em).publish(conv, { type: 'reply_delta', reply_id: 'msg_live2', text: 'live 2' });
    expect(await current.frame(0)).toEqual({ type: 'reply_delta', reply_id: 'msg_live2', text: 'live 2' });
    current.ws.close();
  });
});

describe('malformed notices and listener loss', () => {
  test('a malformed notice is dropped and delivery goes on', async () => {
    const conv = await newConversation();
    const s = await open(baseA, conv);
    for (const junk of ['not json', '{"k":"frame"}', JSON.stringify({ k: 'frame', c: conv, f: 'x' }), '[]']) {
      await db.orm.em.getConnection().execute('select pg_notify(?, ?)', [CHAT_CHANNEL, junk]);
    }
    await new ChatFrames(db.orm.em).publish(conv, { type: 'reply_delta', reply_id: 'msg_ok', text: 'still here' });
    expect(await s.frame(0)).toEqual({ type: 'reply_delta', reply_id: 'msg_ok', text: 'still here' });
    s.ws.close();
    // Dropped notices are logged, but never with the conversation id: it is the socket's capability.
    const logFile = testLogFile('app');
    if (logFile) {
      const log = fs.readFileSync(logFile, 'utf8');
      expect(log).toContain('chat sockets: malformed notice dropped');
      expect(log).not.toContain(conv);
    }
  });

  test('when the LISTEN connection drops, sockets close with 1012 and handshakes get 503 until it is back', async () => {
    const conv = await newConversation();
    const s = await open(baseA, conv);
    // A's one LISTEN connection (shared by its key cache, dense index and sockets) is cut.
    const pid = a.composition.notifications!.backendPid;
    expect(pid).not.toBeNull();
    await db.orm.em.fork().execute('select pg_terminate_backend(?)', [pid]);
    expect((await s.closedWithin(3_000)).code).toBe(1012);
    const during = await connect(baseA, { site_id: site, conversation_id: conv });
    expect(during.status).toBe(503);
    expect(during.body?.error).toBe('socket_unavailable');
    // The listener reconnects (after 1 s) and sockets work again, frames included.
    let again: Socket | null = null;
    for (let i = 0; i < 50 && !again; i++) {
      const h = await connect(baseA, { site_id: site, conversation_id: conv });
      if (h.socket) again = h.socket;
      else await sleep(100);
    }
    expect(again).not.toBeNull();
    await new ChatFrames(db.orm.em).publish(conv, { type: 'reply_delta', reply_id: 'msg_back', text: 'back' });
    expect(await again!.frame(0)).toEqual({ type: 'reply_delta', reply_id: 'msg_back', text: 'back' });
    again!.ws.close();
  });
});

describe('limits before work: socket caps and refused handshakes answer 429 before any lookup', () => {
  /** The shipped defaults (app/config.ts), one process. */
  let capped: TestApp;
  /** Small caps: 2 per conversation, 3 per address. */
  let small: TestApp;
  /** At most 3 refused handshakes a minute per address. */
  let strict: TestApp;
  let baseCapped: string;
  let baseSmall: string;
  let baseStrict: string;
  const defaults = loadConfig({});

  beforeAll(async () => {
    capped = await startTestApp({
      orm: db.orm,
      databaseUrl: db.url,
      chatSocketCaps: { perConversation: defaults.CHAT_MAX_SOCKETS_PER_CONVERSATION, perAddress: defaults.CHAT_MAX_SOCKETS_PER_ADDRESS },
    });
    small = await startTestApp({ orm: db.orm, databaseUrl: db.url, chatSocketCaps: { perConversation: 2, perAddress: 3 } });
    strict = await startTestApp({ orm: db.orm, databaseUrl: db.url, widgetLimits: { perSiteClient: 10_000, sendsPerConversation: 1_000, refusalsPerAddress: 3 } });
    [baseCapped, baseSmall, baseStrict] = [await listen(capped), await listen(small), await listen(strict)];
  });
  afterAll(async () => {
    await capped?.close();
    await small?.close();
    await strict?.close();
  });

  /** Waits until the server has freed the slots of closed sockets. */
  async function slotsDrop(t: TestApp, conv: string, to: number): Promise<void> {
    for (let i = 0; i < 100 && t.chatHub.slotsOf(conv) > to; i++) await sleep(20);
    expect(t.chatHub.slotsOf(conv)).toBe(to);
  }

  test('default config: 10 sockets to one conversation from one address, the 11th is HTTP 429 rate_limited before the upgrade; closing one frees a slot', async () => {
    expect(defaults.CHAT_MAX_SOCKETS_PER_CONVERSATION).toBe(10);
    const conv = await newConversation();
    const sockets: Socket[] = [];
    for (let i = 0; i < 10; i++) sockets.push(await open(baseCapped, conv));
    const refused = await connect(baseCapped, { site_id: site, conversation_id: conv });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ error: 'rate_limited', message: expect.stringContaining('conversation') });
    sockets.pop()!.ws.close();
    await slotsDrop(capped, conv, 9);
    sockets.push(await open(baseCapped, conv));
    for (const s of sockets) s.ws.close();
    await slotsDrop(capped, conv, 0);
  });

  test('per conversation and per client address; refused handshakes hold no slot', async () => {
    const [c1, c2, c3] = [await newConversation(), await newConversation(), await newConversation()];
    const a1 = await open(baseSmall, c1);
    const a2 = await open(baseSmall, c1);
    const overConv = await connect(baseSmall, { site_id: site, conversation_id: c1 });
    expect(overConv.status).toBe(429);
    expect(overConv.body).toEqual({ error: 'rate_limited', message: expect.stringContaining('conversation') });
    // A 403 (the lookup ran and refused) gives its slot back.
    for (let i = 0; i < 3; i++) expect((await connect(baseSmall, { site_id: site, conversation_id: c2 }, OTHER_ORIGIN)).status).toBe(403);
    const b1 = await open(baseSmall, c2);
    const overAddr = await connect(baseSmall, { site_id: site, conversation_id: c3 });
    expect(overAddr.status).toBe(429);
    expect(overAddr.body).toEqual({ error: 'rate_limited', message: expect.stringContaining('address') });
    b1.ws.close();
    await slotsDrop(small, c2, 0);
    const c3s = await open(baseSmall, c3);
    for (const s of [a1, a2, c3s]) s.ws.close();
    await slotsDrop(small, c1, 0);
    await slotsDrop(small, c3, 0);
  });

  test('simultaneous handshakes cannot all pass the cap: of 6 at once to one conversation, exactly 2 open', async () => {
    const conv = await newConversation();
    const results = await Promise.all(Array.from({ length: 6 }, () => connect(baseSmall, { site_id: site, conversation_id: conv })));
    expect(results.filter((r) => r.socket)).toHaveLength(2);
    expect(results.filter((r) => r.status === 429)).toHaveLength(4);
    for (const r of results) r.socket?.ws.close();
    await slotsDrop(small, conv, 0);
  });

  test('an address that keeps presenting unknown sites or refused origins gets 429 without the site lookup running', async () => {
    const conv = await newConversation();
    const lookups = jest.spyOn(strict.services.sites, 'authenticate');
    try {
      expect((await connect(baseStrict, { site_id: 'site_000000000000000000000000', conversation_id: conv })).body?.error).toBe('unknown_site');
      expect((await connect(baseStrict, { site_id: site, conversation_id: conv }, 'https://evil.example')).body?.error).toBe('origin_not_allowed');
      expect((await connect(baseStrict, { site_id: 'site_111111111111111111111111', conversation_id: conv })).body?.error).toBe('unknown_site');
      expect(lookups).toHaveBeenCalledTimes(3);
      const limited = await connect(baseStrict, { site_id: 'site_222222222222222222222222', conversation_id: conv });
      expect(limited.status).toBe(429);
      expect(limited.body).toEqual({ error: 'rate_limited', message: expect.stringContaining('refused') });
      // Even a good handshake from that address waits out the window; no lookup ran for either.
      expect((await connect(baseStrict, { site_id: site, conversation_id: conv })).status).toBe(429);
      expect(lookups).toHaveBeenCalledTimes(3);
    } finally {
      lookups.mockRestore();
    }
  });
});
