import { createHmac } from 'node:crypto';
import { testLogger } from '../support/secret-log';
import { verifyWebhook } from '../../sdk';
import { emitEvent } from '../../core/webhooks/emitter';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { deliveryWorkflowId, webhookDeliveries } from '../../worker/outbox-sources';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { ATTEMPT, DELIVERY_STATUS } from '../../worker/search-attributes';
import { WebhookDelivery } from '../../core/db/entities';
import { historySummaries, maybeRecordHistory, startTestWorker, workflowResult } from '../support/temporal';
import { startHttpsReceiver, type HttpsReceiver } from '../support/tls';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let ws: string;
let auth: Record<string, string>;
const receivers: HttpsReceiver[] = [];

/** Compressed schedule: the same six attempts, waits of 50 ms instead of 1-16 s. */
const BACKOFF = [50, 50, 50, 50, 50];

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  tw = await startTestWorker(db);
  dispatcher = new OutboxDispatcher(
    tw.composition.notifications!,
    // Small inline limits, so the bounds are seen: four first attempts at once, two per subscription.
    [webhookDeliveries(t.services.deliveries, tw.client, { taskQueue: tw.taskQueue, backoffMs: BACKOFF, timeoutMs: 1_000, inline: { overall: 4, perSubscription: 2 } })],
    testLogger(),
    500,
  );
  await dispatcher.start();
});
// Each test gets its own workspace, so one test's subscriptions never see another's events.
beforeEach(async () => {
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['webhooks:read', 'webhooks:write'])).key);
});
afterAll(async () => {
  await t.close();
  await dispatcher.stop();
  await tw.close();
  for (const r of receivers) await r.close();
  await db.drop();
});

/** A receiver answering each request with the next status of `script` (the last one repeats). */
async function receiver(script: number[]): Promise<HttpsReceiver> {
  let i = 0;
  const r = await startHttpsReceiver({
    handler: (_req, res) => {
      const status = script[Math.min(i++, script.length - 1)];
      res.writeHead(status, { 'content-type': 'text/plain' }).end(`answer ${status}`);
    },
  });
  receivers.push(r);
  return r;
}

async function subscribe(url: string, events = ['message.inbound', 'message.status']) {
  const res = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: auth, payload: { url, events } });
  expect(res.statusCode).toBe(201);
  return res.json() as { id: string; secret: string };
}

const emit = (type: 'message.inbound' | 'message.status', data: Record<string, unknown>) =>
  db.orm.em.fork().transactional((tx) => emitEvent(tx, ws, type, data));

/** Waits for the delivery's current run to settle (delivered by the dispatcher's first attempt, or by or after its retry workflow). */
/** Waits for a delivery to leave `pending`; polled every 100 ms (tests wait on 20 at once: faster polling loads the database they wait on). */
async function settled(deliveryId: string): Promise<string> {
  const deadline = Date.now() + 45_000;
  for (;;) {
    const row = await db.orm.em.fork().findOneOrFail(WebhookDelivery, { id: deliveryId });
    if (row.status !== 'pending') return row.status;
    if (Date.now() > deadline) throw new Error(`delivery ${deliveryId} still pending`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
const retryWorkflowExists = (deliveryId: string) =>
  tw.client.workflow
    .getHandle(deliveryWorkflowId(deliveryId))
    .describe()
    .then(
      () => true,
      () => false,
    );

const sub = async (id: string) =>
  (await t.app.inject({ method: 'GET', url: '/api/v1/webhook-subscriptions', headers: auth })).json().subscriptions.find((s: { id: string }) => s.id === id);

describe('webhook delivery: the first attempt from the outbox dispatcher, a retry workflow for those that fail it', () => {
  test('fail, fail, succeed → 3 attempts with one delivery id, signed, delivered; counter reset', async () => {
    const r = await receiver([500, 503, 200]);
    const s = await subscribe(`${r.url}/hook`);
    const { eventId, deliveryIds } = await emit('message.inbound', { message_id: 'msg_1', channel: 'msgapp', text: 'hi' });
    expect(deliveryIds).toHaveLength(1);
    expect(await settled(deliveryIds[0])).toBe('delivered');
    expect(await workflowResult<string>(tw.client, deliveryWorkflowId(deliveryIds[0]))).toBe('delivered');
    await maybeRecordHistory(tw.client, deliveryWorkflowId(deliveryIds[0]), 'webhook-delivery-retry-local-steps');

    expect(r.hits).toHaveLength(3);
    expect(new Set(r.hits.map((h) => h.headers['x-concierge-delivery']))).toEqual(new Set([deliveryIds[0]]));
    for (const hit of r.hits) {
      expect(hit.method).toBe('POST');
      expect(hit.headers['content-type']).toBe('application/json');
      expect(hit.headers['x-concierge-event']).toBe('message.inbound');
      expect(hit.headers['user-agent']).toMatch(/^Concierge-Webhooks\//);
      // An independent check of the signature: HMAC-SHA256 over "<t>.<raw body>", keyed with the whole whsec_ string.
      const sig = String(hit.headers['x-concierge-signature']);
      const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(sig)!;
      expect(createHmac('sha256', s.secret).update(`${t}.${hit.rawBody.toString('utf8')}`).digest('hex')).toBe(v1);
      expect(Math.abs(Number(t) - Date.now() / 1000)).toBeLessThan(30);
      expect(verifyWebhook(hit.rawBody, sig, s.secret)).toEqual({ id: eventId, event: 'message.inbound', created_at: expect.any(String), data: { message_id: 'msg_1', channel: 'msgapp', text: 'hi' } });
    }
    // The body was serialised once: byte-identical on every attempt.
    expect(new Set(r.hits.map((h) => h.rawBody.toString('utf8'))).size).toBe(1);
    expect(await sub(s.id)).toMatchObject({ consecutive_failures: 0, last_delivered_at: expect.any(String), status: 'active' });

    const detail = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${deliveryIds[0]}`, headers: auth })).json();
    expect(detail).toMatchObject({ id: deliveryIds[0], status: 'delivered', attempt_count: 3, last_status_code: 200 });
    expect(detail.attempts.map((a: { attempt: number; status_code: number }) => [a.attempt, a.status_code])).toEqual([
      [1, 500],
      [2, 503],
      [3, 200],
    ]);
    expect(detail.attempts[0]).toMatchObject({ run: 1, error: 'HTTP 500', response_body: 'answer 500', latency_ms: expect.any(Number) });
  });

  test('always failing → exactly 6 attempts, delivery failed with its payload kept, failure counted once', async () => {
    const r = await receiver([500]);
    const s = await subscribe(r.url);
    const { deliveryIds } = await emit('message.status', { message_id: 'msg_2', status: 'delivered' });
    expect(await settled(deliveryIds[0])).toBe('failed');
    expect(r.hits).toHaveLength(6);
    const detail = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${deliveryIds[0]}`, headers: auth })).json();
    expect(detail).toMatchObject({ status: 'failed', attempt_count: 6, payload: { event: 'message.status', data: { message_id: 'msg_2', status: 'delivered' } } });
    expect(await sub(s.id)).toMatchObject({ consecutive_failures: 1, last_error: 'HTTP 500', last_failed_at: expect.any(String), status: 'active' });

    // What an operator sees: the exhausted delivery is findable by its status attribute, explains itself, and
    // its steps are labelled.
    // The record settles a moment before the workflow's last step (its final status attribute): wait for the workflow.
    expect(await workflowResult<string>(tw.client, deliveryWorkflowId(deliveryIds[0]))).toBe('failed');
    const handle = tw.client.workflow.getHandle(deliveryWorkflowId(deliveryIds[0]));
    const described = await handle.describe();
    expect(described.typedSearchAttributes.get(DELIVERY_STATUS)).toBe('failed');
    expect(described.typedSearchAttributes.get(ATTEMPT)).toBe(6);
    expect(await described.staticSummary()).toBe(`message.status → ${new URL(r.url).host}`);
    const failed = await tw.client.workflow.count(`WorkflowId = '${deliveryWorkflowId(deliveryIds[0])}' AND ConciergeDeliveryStatus = 'failed'`);
    expect(failed.count).toBe(1);
    const meta = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(meta.currentDetails).toMatch(/^Failed after 6 attempts\. Last error: HTTP 500/);
    const summaries = await historySummaries(tw.client, handle.workflowId);
    // Attempt 1 was the dispatcher's: the workflow starts by waiting the first backoff, then attempts 2–6.
    expect(summaries.filter((x: string) => x.startsWith('POST'))).toEqual(['POST, attempt 2/6', 'POST, attempt 3/6', 'POST, attempt 4/6', 'POST, attempt 5/6', 'POST, attempt 6/6']);
    expect(summaries).toEqual(expect.arrayContaining(['backoff before attempt 2/6', 'record: failed after every attempt']));
    expect(await described.staticDetails()).toMatch(/attempt 1 was made by the outbox dispatcher and failed \(HTTP 500\)/);
  });

  test('only subscribers of the event type get a delivery', async () => {
    const r = await receiver([200]);
    const s = await subscribe(r.url, ['message.status']);
    const { deliveryIds } = await emit('message.inbound', { message_id: 'msg_3' });
    const list = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries`, headers: auth })).json();
    expect(list.deliveries).toEqual([]);
    for (const id of deliveryIds) await settled(id);
    expect(r.hits).toHaveLength(0);
  });

  test('20 failed deliveries in a row disable the subscription once; re-enabling clears; disabled gets nothing', async () => {
    const r = await receiver([500]);
    const s = await subscribe(r.url, ['message.status']);
    const emitted = await Promise.all(Array.from({ length: 20 }, (_, i) => emit('message.status', { message_id: `msg_f${i}` })));
    const mine = emitted.map((e) => e.deliveryIds[0]);
    const outcomes = await Promise.all(mine.map((id) => settled(id)));
    expect(outcomes.every((o) => o === 'failed')).toBe(true);
    const disabled = await sub(s.id);
    expect(disabled).toMatchObject({ status: 'disabled', consecutive_failures: 20, disabled_reason: expect.stringContaining('20 consecutive failed deliveries') });

    const hitsBefore = r.hits.length;
    await emit('message.status', { message_id: 'msg_while_disabled' });
    const list = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries?limit=200`, headers: auth })).json();
    expect(list.deliveries).toHaveLength(20);
    await new Promise((res) => setTimeout(res, 300));
    expect(r.hits.length).toBe(hitsBefore);

    const enabled = await t.app.inject({ method: 'PATCH', url: `/api/v1/webhook-subscriptions/${s.id}`, headers: auth, payload: { status: 'active' } });
    expect(enabled.json()).toMatchObject({ status: 'active', consecutive_failures: 0, disabled_reason: null });
  }, 60_000);

  test('rotating the secret: the old one no longer verifies the next delivery', async () => {
    const r = await receiver([200]);
    const s = await subscribe(r.url, ['message.inbound']);
    const rotated = (await t.app.inject({ method: 'PATCH', url: `/api/v1/webhook-subscriptions/${s.id}`, headers: auth, payload: { rotate_secret: true } })).json();
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(s.secret);
    const { deliveryIds } = await emit('message.inbound', { message_id: 'msg_rot' });
    expect(await settled(deliveryIds[0])).toBe('delivered');
    const hit = r.hits[0];
    const sig = String(hit.headers['x-concierge-signature']);
    expect(() => verifyWebhook(hit.rawBody, sig, s.secret)).toThrow(/no signature matches/);
    expect(verifyWebhook(hit.rawBody, sig, rotated.secret)).toMatchObject({ event: 'message.inbound' });
  });

  test('retry re-delivers with the same delivery id as a new run; replay re-delivers a window of failures', async () => {
    let healthy = false;
    const r = await startHttpsReceiver({ handler: (_req, res) => res.writeHead(healthy ? 204 : 500).end() });
    receivers.push(r);
    const s = await subscribe(r.url, ['message.status']);
    const since = new Date(Date.now() - 1000).toISOString();
    const a = (await emit('message.status', { message_id: 'msg_a' })).deliveryIds[0];
    const b = (await emit('message.status', { message_id: 'msg_b' })).deliveryIds[0];
    expect(await settled(a)).toBe('failed');
    expect(await settled(b)).toBe('failed');
    healthy = true;

    const retried = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${a}/retry`, headers: auth });
    expect(retried.statusCode).toBe(202);
    expect(retried.json()).toMatchObject({ id: a, status: 'pending' });
    const deadline = Date.now() + 10_000;
    const detailOf = async (id: string) => (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${id}`, headers: auth })).json();
    while ((await detailOf(a)).status !== 'delivered' && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    const detail = await detailOf(a);
    expect(detail.status).toBe('delivered');
    expect(detail.attempts.at(-1)).toMatchObject({ run: 2, attempt: 1, status_code: 204 });
    const lastHit = r.hits.at(-1)!;
    expect(lastHit.headers['x-concierge-delivery']).toBe(a);

    const replay = await t.app.inject({
      method: 'POST',
      url: `/api/v1/webhook-subscriptions/${s.id}/replay`,
      headers: auth,
      payload: { since, until: new Date(Date.now() + 1000).toISOString() },
    });
    expect(replay.statusCode).toBe(202);
    expect(replay.json()).toEqual({ replayed: 1, delivery_ids: [b] });
    while ((await detailOf(b)).status !== 'delivered' && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    expect((await detailOf(b)).status).toBe('delivered');
    expect((await sub(s.id)).consecutive_failures).toBe(0);
  }, 30_000);

  test('a delivery whose first attempt succeeds is delivered by the dispatcher: logged as attempt 1, no workflow', async () => {
    const r = await receiver([200]);
    const s = await subscribe(r.url, ['message.inbound']);
    const { deliveryIds } = await emit('message.inbound', { message_id: 'msg_inline' });
    expect(await settled(deliveryIds[0])).toBe('delivered');
    expect(r.hits).toHaveLength(1);
    const detail = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${deliveryIds[0]}`, headers: auth })).json();
    expect(detail).toMatchObject({ status: 'delivered', attempt_count: 1, last_status_code: 200 });
    expect(detail.attempts).toEqual([expect.objectContaining({ run: 1, attempt: 1, status_code: 200 })]);
    expect(await sub(s.id)).toMatchObject({ consecutive_failures: 0, last_delivered_at: expect.any(String) });
    expect(await retryWorkflowExists(deliveryIds[0])).toBe(false);
  });

  test('a slow endpoint holds only its own first attempts (two at once per subscription); others are delivered meanwhile', async () => {
    let open = 0;
    let maxOpen = 0;
    const slow = await startHttpsReceiver({
      handler: (_req, res) => {
        open++;
        maxOpen = Math.max(maxOpen, open);
        setTimeout(() => {
          open--;
          res.writeHead(200).end();
        }, 600);
      },
    });
    receivers.push(slow);
    const fast = await receiver([200]);
    await subscribe(slow.url, ['message.status']);
    await subscribe(fast.url, ['message.inbound']);
    const slowIds = (await Promise.all(Array.from({ length: 6 }, (_, i) => emit('message.status', { message_id: `msg_slow${i}` })))).map((e) => e.deliveryIds[0]);
    const fastId = (await emit('message.inbound', { message_id: 'msg_fast' })).deliveryIds[0];
    expect(await settled(fastId)).toBe('delivered');
    // The fast delivery went out while the slow endpoint still had its first requests open.
    expect(slow.hits.length).toBeLessThan(6);
    for (const id of slowIds) expect(await settled(id)).toBe('delivered');
    expect(maxOpen).toBe(2);
    expect(slow.hits).toHaveLength(6);
  }, 30_000);

  test('the retry workflow carries search attributes an operator can filter on', async () => {
    const r = await receiver([500, 200]);
    const s = await subscribe(r.url, ['message.inbound']);
    const { deliveryIds } = await emit('message.inbound', { message_id: 'msg_sa' });
    expect(await settled(deliveryIds[0])).toBe('delivered');
    const desc = await tw.client.workflow.getHandle(deliveryWorkflowId(deliveryIds[0])).describe();
    expect(desc.searchAttributes).toMatchObject({ ConciergeWorkspaceId: [ws], ConciergeSubscriptionId: [s.id], ConciergeEventType: ['message.inbound'] });
  });
});
