import { createHmac } from 'node:crypto';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';
import { WebhookRepository } from '../../domain/webhooks/emitter';
import { WebhookAttempt, WebhookDelivery } from '../../db/entities';
import { DELIVERY_CANCELLED } from '../../workflows/webhook-delivery';

/** The webhook outbox, as the services write it (events are emitted in a transaction of the test's own). */
const webhooks = new WebhookRepository();

let db: TestDatabase;
let t: TestApp;
let strict: TestApp;
let auth: Record<string, string>;
let receiver: HttpsReceiver;
let answer = 200;

beforeAll(async () => {
  db = await createTestDatabase();
  // Loopback allowed (test receivers), as CONCIERGE_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 would.
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  // The default policy: no private range allowed.
  strict = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { sender: { policy: policyFromCidrs(''), timeoutMs: 2_000 } } });
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['webhooks:read', 'webhooks:write'])).key);
  receiver = await startHttpsReceiver({ handler: (_req, res) => res.writeHead(answer).end('ok') });
});
afterAll(async () => {
  await receiver.close();
  await t.close();
  await strict.close();
  await db.drop();
});

const create = (payload: unknown, app = t) => app.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: auth, payload: payload as object });
const patch = (id: string, payload: unknown) => t.app.inject({ method: 'PATCH', url: `/api/v1/webhook-subscriptions/${id}`, headers: auth, payload: payload as object });

describe('webhook subscriptions', () => {
  test('create: 201 with the subscription and a whsec_ secret returned once', async () => {
    const res = await create({ url: `${receiver.url}/hooks`, events: ['message.inbound', 'message.status', 'message.inbound'] });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(/^whk_[0-9a-f]{24}$/),
      url: `${receiver.url}/hooks`,
      events: ['message.inbound', 'message.status'],
      status: 'active',
      consecutive_failures: 0,
      last_error: null,
      last_failed_at: null,
      last_delivered_at: null,
      disabled_reason: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{43,}$/),
    });
    // The list and the single read add the health; nothing is failing yet.
    const health = { failing_since: null, retrying_now: 0, failed_now: 0, last_error: null, last_delivered_at: null };
    const { secret: _secret, ...withoutSecret } = body;
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${body.id}`, headers: auth })).json()).toEqual({ ...withoutSecret, health });
    const listed = (await t.app.inject({ method: 'GET', url: '/api/v1/webhook-subscriptions', headers: auth })).json();
    const item = listed.subscriptions.find((s: { id: string }) => s.id === body.id);
    expect(item).toEqual({ ...withoutSecret, health });
    expect(JSON.stringify(listed)).not.toContain(body.secret);
  });

  test('the secret is stored encrypted, never in clear', async () => {
    const { id, secret } = (await create({ url: receiver.url, events: ['message.inbound'] })).json();
    const [row] = await db.orm.em.fork().execute('select * from webhook_subscriptions where id = ?', [id]);
    expect(JSON.stringify(row)).not.toContain(secret.slice(6));
    expect(row.secret_sealed).toMatch(/^v1\./);
  });

  test('an idempotent create replays the same whsec_ secret, but the stored response holds it only sealed', async () => {
    const headers = { ...auth, 'idempotency-key': 'sub-with-secret' };
    const payload = { url: receiver.url, events: ['message.inbound'] };
    const first = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers, payload });
    expect(first.statusCode).toBe(201);
    const { secret } = first.json();
    const replay = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers, payload });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json().secret).toBe(secret);
    const rows = await db.orm.em.fork().execute('select * from idempotency_keys where key = ?', ['sub-with-secret']);
    expect(rows).toHaveLength(1);
    expect(rows[0].state).toBe('completed');
    expect(JSON.stringify(rows[0])).not.toContain('whsec_');
    expect(JSON.stringify(rows[0])).not.toContain(secret.slice(6));
    expect(rows[0].response_body).toMatch(/^v1\./);
  });

  test('bad bodies: events must be a non-empty subset; webhook.test cannot be subscribed to', async () => {
    for (const payload of [
      { url: receiver.url, events: [] },
      { url: receiver.url, events: ['webhook.test'] },
      { url: receiver.url, events: ['message.deleted'] },
      { url: receiver.url },
      { events: ['message.inbound'] },
      { url: receiver.url, events: ['message.inbound'], secret: 'mine' },
    ]) {
      const res = await create(payload);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
  });

  test.each([
    ['http://example.com/hook', /https/],
    ['ftp://example.com/hook', /https/],
    ['https://user:pass@example.com/hook', /credentials/],
    ['https://10.0.0.1/hook', /private/],
    ['https://169.254.169.254/latest/meta-data', /link-local/],
    ['https://[::1]/hook', /loopback/],
    ['https://2130706433/hook', /loopback/],
    ['https://localhost/hook', /loopback/],
    ['not a url', /./],
  ])('refused at registration: %s → 400 invalid_url with the reason', async (url, reason) => {
    const res = await create({ url, events: ['message.inbound'] }, strict);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_url', message: expect.stringMatching(/^url: /), reason: expect.stringMatching(reason) });
  });

  test('update: url re-validated, events, status; rotate_secret returns the new secret once', async () => {
    const { id, secret } = (await create({ url: receiver.url, events: ['message.inbound'] })).json();
    const bad = await t.app.inject({ method: 'PATCH', url: `/api/v1/webhook-subscriptions/${id}`, headers: auth, payload: { url: 'http://example.com' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('invalid_url');
    const events = await patch(id, { events: ['message.status'] });
    expect(events.json()).toMatchObject({ id, events: ['message.status'] });
    expect(events.json().secret).toBeUndefined();
    const paused = await patch(id, { status: 'disabled' });
    expect(paused.json()).toMatchObject({ status: 'disabled', disabled_reason: expect.any(String) });
    const resumed = await patch(id, { status: 'active' });
    expect(resumed.json()).toMatchObject({ status: 'active', disabled_reason: null, consecutive_failures: 0 });
    const rotated = await patch(id, { rotate_secret: true });
    expect(rotated.json().secret).toMatch(/^whsec_/);
    expect(rotated.json().secret).not.toBe(secret);
    expect((await patch(id, {})).statusCode).toBe(400);
    expect((await patch('whk_nope', { status: 'active' })).statusCode).toBe(404);
  });

  test('delete: 204 with no body, then 404', async () => {
    const { id } = (await create({ url: receiver.url, events: ['message.inbound'] })).json();
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-subscriptions/${id}`, headers: auth });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-subscriptions/${id}`, headers: auth })).statusCode).toBe(404);
  });

  test('test endpoint: a signed webhook.test, synchronously, with the endpoint’s status', async () => {
    const { id, secret } = (await create({ url: `${receiver.url}/t`, events: ['message.inbound'] })).json();
    const before = receiver.hits.length;
    answer = 200;
    const ok = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${id}/test`, headers: auth });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ delivered: true, status: 200 });
    const hit = receiver.hits[before];
    expect(hit.headers['x-concierge-event']).toBe('webhook.test');
    expect(hit.headers['x-concierge-delivery']).toMatch(/^dlv_/);
    const [, ts, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(hit.headers['x-concierge-signature']))!;
    expect(createHmac('sha256', secret).update(`${ts}.`).update(hit.rawBody).digest('hex')).toBe(v1);
    expect(JSON.parse(hit.rawBody.toString())).toEqual({ id: expect.stringMatching(/^evt_/), event: 'webhook.test', created_at: expect.any(String), data: expect.any(Object) });

    answer = 410;
    expect((await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${id}/test`, headers: auth })).json()).toEqual({ delivered: false, status: 410 });
  });

  test('test endpoint: a transport error is {delivered: false, status: 0, error}', async () => {
    const gone = await startHttpsReceiver({ handler: (_req, res) => res.end() });
    const url = gone.url;
    await gone.close();
    const { id } = (await create({ url, events: ['message.inbound'] })).json();
    const res = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${id}/test`, headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ delivered: false, status: 0, error: expect.stringMatching(/ECONNREFUSED/) });
  });

  test('deliveries endpoints: unknown subscription or delivery is 404; bad cursor 400; replay window validated', async () => {
    const { id } = (await create({ url: receiver.url, events: ['message.inbound'] })).json();
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/whk_nope/deliveries`, headers: auth })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${id}/deliveries/dlv_nope`, headers: auth })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${id}/deliveries/dlv_nope/retry`, headers: auth })).statusCode).toBe(404);
    const cursor = await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${id}/deliveries?cursor=garbage`, headers: auth });
    expect(cursor.statusCode).toBe(400);
    expect(cursor.json().message).toMatch(/^querystring\.cursor: /);
    const empty = await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${id}/deliveries`, headers: auth });
    expect(empty.json()).toEqual({ deliveries: [], next_cursor: null });
    const now = new Date().toISOString();
    const backwards = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${id}/replay`, headers: auth, payload: { since: now, until: now } });
    expect(backwards.statusCode).toBe(400);
    expect(backwards.json().message).toMatch(/until/);
  });

  test('health, failed deliveries across subscriptions, retry all and retry now: each workspace sees and moves only its own', async () => {
    // Two fresh workspaces: every delivery emitted below is of the subscription made here.
    const wsA = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, wsA, ['webhooks:read', 'webhooks:write'])).key);
    const wsB = await createWorkspace(db.orm);
    const authB = bearer((await createKey(t.services, wsB, ['webhooks:read', 'webhooks:write'])).key);
    const readOnlyB = bearer((await createKey(t.services, wsB, ['webhooks:read'])).key);
    const [subA, subB] = [(await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: auth, payload: { url: receiver.url, events: ['message.status'] } })).json(), (await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: authB, payload: { url: receiver.url, events: ['message.status'] } })).json()];
    // No dispatcher runs here: the deliveries' states are set as a worker would leave them.
    const emitIn = (ws: string) => db.orm.em.fork().transactional((tx) => webhooks.emitEvent(tx, ws, 'message.status', { message_id: 'msg_h' }));
    const [a1, a2] = [(await emitIn(wsA)).deliveryIds[0], (await emitIn(wsA)).deliveryIds[0]];
    const b1 = (await emitIn(wsB)).deliveryIds[0];
    const em = db.orm.em.fork();
    const started = new Date(Date.now() - 60_000);
    await em.insert(WebhookAttempt, { deliveryId: a1, run: 1, attempt: 1, startedAt: started, statusCode: 500, error: 'HTTP 500', latencyMs: 3, responseBody: 'down' });
    await em.nativeUpdate(WebhookDelivery, { id: a1 }, { status: 'pending', dispatchedAt: new Date(), lastError: 'HTTP 500' });
    await em.nativeUpdate(WebhookDelivery, { id: { $in: [a2, b1] } }, { status: 'failed', completedAt: new Date(), lastError: DELIVERY_CANCELLED, dispatchedAt: new Date() });

    const read = async (id: string, headers = auth) => (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${id}`, headers })).json();
    // A cancelled delivery counts as a failure for display; the retrying one shows with its attempt's error.
    expect((await read(subA.id)).health).toEqual({ failing_since: started.toISOString(), retrying_now: 1, failed_now: 1, last_error: DELIVERY_CANCELLED, last_delivered_at: null });
    expect((await read(subB.id, authB)).health).toMatchObject({ retrying_now: 0, failed_now: 1 });
    expect(await read(subA.id, authB)).toMatchObject({ error: 'not_found' });
    const listedA = (await t.app.inject({ method: 'GET', url: '/api/v1/webhook-subscriptions', headers: auth })).json();
    expect(listedA.subscriptions.find((x: { id: string }) => x.id === subA.id).health.retrying_now).toBe(1);

    // Failed deliveries across subscriptions: only the workspace's own, cursor-paged; a foreign subscription id matches nothing.
    const failedA = (await t.app.inject({ method: 'GET', url: '/api/v1/webhook-deliveries?status=failed&limit=1', headers: auth })).json();
    expect(failedA).toMatchObject({ deliveries: [{ id: a2, status: 'failed', subscription_id: subA.id }], next_cursor: null });
    const pendingA = (await t.app.inject({ method: 'GET', url: '/api/v1/webhook-deliveries?status=pending', headers: auth })).json();
    expect(pendingA.deliveries.map((d: { id: string }) => d.id)).toEqual([a1]);
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/webhook-deliveries?subscription_id=${subA.id}`, headers: authB })).json()).toEqual({ deliveries: [], next_cursor: null });
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/webhook-deliveries', headers: authB })).json().deliveries.map((d: { id: string }) => d.id)).toEqual([b1]);

    // Retry all: scoped, filtered, idempotent, and a write.
    const retryAll = (payload: object, headers = auth) => t.app.inject({ method: 'POST', url: '/api/v1/webhook-deliveries/retry', headers, payload });
    expect((await retryAll({ subscription_id: subA.id }, readOnlyB)).statusCode).toBe(403);
    expect((await retryAll({ subscription_id: subA.id }, authB)).json()).toEqual({ retried: 0, delivery_ids: [], more: false });
    expect((await retryAll({ until: new Date(Date.now() - 3_600_000).toISOString() })).json()).toMatchObject({ retried: 0 });
    const moved = await retryAll({ subscription_id: subA.id });
    expect(moved.statusCode).toBe(202);
    expect(moved.json()).toEqual({ retried: 1, delivery_ids: [a2], more: false });
    expect((await retryAll({ subscription_id: subA.id })).json()).toMatchObject({ retried: 0 });
    expect(await em.fork().findOneOrFail(WebhookDelivery, { id: a2 })).toMatchObject({ status: 'pending', run: 2, dispatchedAt: null });
    expect((await em.fork().findOneOrFail(WebhookDelivery, { id: b1 })).status).toBe('failed');

    // Retry now: another workspace's delivery is not found; one not waiting between attempts is a 409; without a
    // Temporal connection (this app has none) a waiting one is 503.
    const now = (sub: string, dlv: string, headers = auth) => t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${sub}/deliveries/${dlv}/retry-now`, headers });
    expect((await now(subA.id, a1, authB)).statusCode).toBe(404);
    expect((await now(subA.id, a2)).json()).toMatchObject({ error: 'delivery_not_retrying' });
    expect((await now(subB.id, b1, authB)).statusCode).toBe(409);
    expect((await now(subA.id, a1)).json()).toMatchObject({ error: 'workflow_unavailable' });
  });
});
