import { newId } from '../../lib/ids';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let auth: Record<string, string>;
let ws: string;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['customers:read', 'customers:write', 'conversations:read'])).key);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const post = (url: string, payload: unknown) => t.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });
const get = (url: string) => t.app.inject({ method: 'GET', url, headers: auth });

describe('customers', () => {
  test('create, get, list by identity, update', async () => {
    const res = await post('/api/v1/customers', { name: 'Ana', email: 'Ana@Example.com', phone: '+351912345678', metadata: { tier: 'gold' } });
    expect(res.statusCode).toBe(201);
    const c = res.json();
    expect(c).toMatchObject({ id: expect.stringMatching(/^cus_/), name: 'Ana', email: 'ana@example.com', phone: '+351912345678', metadata: { tier: 'gold' } });
    expect(c.identities).toEqual([
      { kind: 'email', value: 'ana@example.com' },
      { kind: 'phone', value: '+351912345678' },
    ]);
    expect((await get(`/api/v1/customers/${c.id}`)).json()).toEqual(c);
    expect((await get('/api/v1/customers?phone=%2B351912345678')).json().customers.map((x: { id: string }) => x.id)).toEqual([c.id]);
    const patched = await t.app.inject({ method: 'PATCH', url: `/api/v1/customers/${c.id}`, headers: auth, payload: { phone: '+351900000000', name: 'Ana M.' } });
    expect(patched.json()).toMatchObject({ name: 'Ana M.', phone: '+351900000000' });
    expect((await get('/api/v1/customers?phone=%2B351912345678')).json().customers).toEqual([]);
  });

  test('an identity names one customer: 409 identity_in_use points at the owner', async () => {
    const a = (await post('/api/v1/customers', { email: 'dup@example.com' })).json();
    const clash = await post('/api/v1/customers', { email: 'DUP@example.com' });
    expect(clash.statusCode).toBe(409);
    expect(clash.json()).toMatchObject({ error: 'identity_in_use', customer_id: a.id });
  });

  test('bad input is 400 naming the field', async () => {
    for (const [payload, field] of [
      [{ phone: '12345' }, 'body.phone'],
      [{ email: 'not-an-email' }, 'body.email'],
      [{ nickname: 'x' }, 'nickname'],
    ] as const) {
      const res = await post('/api/v1/customers', payload);
      expect(res.statusCode).toBe(400);
      expect(res.json().message).toContain(field);
    }
    expect((await post('/api/v1/customer/link', {})).statusCode).toBe(400);
  });

  test('link attaches identities and merges the customers that held them, conversations included', async () => {
    const byPhone = (await post('/api/v1/customers', { phone: '+15550100001', name: 'From WhatsApp' })).json();
    const byEmail = (await post('/api/v1/customers', { email: 'merge@example.com', name: 'From web' })).json();
    const conv = newId('conv');
    await db.orm.em.fork().execute(`insert into conversations (id, workspace_id, customer_id, channel, status) values (?, ?, ?, 'web', 'open')`, [conv, ws, byEmail.id]);

    const res = await post('/api/v1/customer/link', { customer_id: byPhone.id, email: 'merge@example.com', external_id: 'crm-77' });
    expect(res.statusCode).toBe(200);
    expect(res.json().merged_customer_ids).toEqual([byEmail.id]);
    expect(res.json().customer).toMatchObject({ id: byPhone.id, phone: '+15550100001', email: 'merge@example.com', external_id: 'crm-77' });
    expect(res.json().customer.identities.map((i: { kind: string }) => i.kind).sort()).toEqual(['email', 'external_id', 'phone']);
    expect((await get(`/api/v1/customers/${byEmail.id}`)).statusCode).toBe(404);
    expect((await get(`/api/v1/conversations/${conv}`)).json().customer_id).toBe(byPhone.id);

    // Without customer_id: the holder of an identity is found, or a new customer made.
    const again = (await post('/api/v1/customer/link', { external_id: 'crm-77', phone: '+15550100002' })).json();
    expect(again.customer.id).toBe(byPhone.id);
    const fresh = (await post('/api/v1/customer/link', { external_id: 'crm-new' })).json();
    expect(fresh.customer.id).not.toBe(byPhone.id);
    expect((await post('/api/v1/customer/link', { customer_id: 'cus_nope', email: 'x@example.com' })).statusCode).toBe(404);
  });
});

describe('conversations', () => {
  test('list, get, events timeline, cases; calls and recordings are well-formed and empty', async () => {
    const customer = (await post('/api/v1/customers', { phone: '+15550100099' })).json();
    const open = newId('conv');
    const flagged = newId('conv');
    const em = db.orm.em.fork();
    await em.execute(`insert into conversations (id, workspace_id, customer_id, channel, status) values (?, ?, ?, 'msgapp', 'open')`, [open, ws, customer.id]);
    await em.execute(`insert into conversations (id, workspace_id, customer_id, channel, status, needs_human, case_reason) values (?, ?, ?, 'web', 'open', true, 'asked for a human')`, [
      flagged,
      ws,
      customer.id,
    ]);
    for (let i = 0; i < 3; i++) await em.execute(`insert into conversation_events (id, conversation_id, type, data) values (?, ?, 'message', ?::jsonb)`, [`cev_${i}${open.slice(5)}`, open, JSON.stringify({ n: i })]);

    const list = (await get(`/api/v1/conversations?customer_id=${customer.id}`)).json();
    expect(list.conversations.map((c: { id: string }) => c.id).sort()).toEqual([open, flagged].sort());
    expect((await get(`/api/v1/conversations/${open}`)).json()).toMatchObject({ id: open, channel: 'msgapp', status: 'open', needs_human: false });
    const page1 = (await get(`/api/v1/conversations/${open}/events?limit=2`)).json();
    expect(page1.events.map((e: { data: { n: number } }) => e.data.n)).toEqual([0, 1]);
    const page2 = (await get(`/api/v1/conversations/${open}/events?limit=2&cursor=${page1.next_cursor}`)).json();
    expect(page2).toMatchObject({ events: [{ data: { n: 2 } }], next_cursor: null });
    expect((await get('/api/v1/cases')).json().cases.map((c: { id: string }) => c.id)).toEqual([flagged]);
    expect((await get('/api/v1/calls')).json()).toEqual({ calls: [], next_cursor: null });
    expect((await get('/api/v1/calls/call_1')).statusCode).toBe(404);
    expect((await get(`/api/v1/conversations/${open}/recordings`)).json()).toEqual({ recordings: [] });
    expect((await get('/api/v1/conversations/conv_nope/recordings')).statusCode).toBe(404);
  });
});
