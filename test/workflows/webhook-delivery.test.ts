import { createHmac } from 'node:crypto';
import { testLogger } from '../support/secret-log';
import { verifyWebhook } from '../../lib/webhook-signature';
import { WebhookRepository } from '../../domain/webhooks/emitter';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { deliveryWorkflowId, webhookDeliveries } from '../../worker/outbox-sources';
import { reconcileStrandedWorkflow } from '../../workflows';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { ATTEMPT, DELIVERY_STATUS, LAST_ERROR } from '../../worker/namespace-attributes';
import { WebhookDelivery } from '../../db/entities';
import { decryptPayloadsIn, EncryptionCodec } from '../../lib/crypto/payload-codec';
import { historySummaries, maybeRecordHistory, startTestWorker, workflowResult } from '../support/temporal';
import { startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';

/** The webhook outbox, as the services write it (events are emitted in a transaction of the test's own). */
const webhooks = new WebhookRepository();

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let ws: string;
let auth: Record<string, string>;
const receivers: HttpsReceiver[] = [];

/** Compressed schedule: the same six attempts, waits of 50 ms instead of 1-16 s. */
const BACKOFF = [50, 50, 50, 50, 50];

/** The dispatcher's settings: a test may lengthen the schedule's last wait (read at each retry workflow's start). */
const settings = { taskQueue: '', backoffMs: BACKOFF, timeoutMs: 1_000, inline: { overall: 4, perSubscription: 2 } };

beforeAll(async () => {
  db = await createTestDatabase();
  tw = await startTestWorker(db);
  // With the worker's client: "retry now" signals the delivery's run.
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  settings.taskQueue = tw.taskQueue;
  dispatcher = new OutboxDispatcher(
    tw.composition.notifications!,
    // Small inline limits, so the bounds are seen: four first attempts at once, two per subscription.
    [webhookDeliveries(t.services.deliveries, tw.client, settings)],
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
  db.orm.em.fork().transactional((tx) => webhooks.emitEvent(tx, ws, type, data));

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

/** Polls `read` until `ok` holds (visibility and the delivery log move a moment after the events). */
async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** The failed activities of a workflow's history, decoded as the UI shows them: message, type, first detail. */
async function failedAttempts(workflowId: string): Promise<Array<{ message: string; type: string; details: { statusCode: number; error: string; responseBody: string | null } }>> {
  const converter = tw.client.options.loadedDataConverter;
  const codec = converter.payloadCodecs.find((c): c is EncryptionCodec => c instanceof EncryptionCodec);
  const events = (await tw.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const failures = events.flatMap((e) => (e.activityTaskFailedEventAttributes ? [e.activityTaskFailedEventAttributes.failure!] : []));
  return Promise.all(
    failures.map(async (f) => {
      const [attrs, detail] = await (codec ? decryptPayloadsIn([f.encodedAttributes!, f.applicationFailureInfo!.details!.payloads![0]], codec) : [f.encodedAttributes!, f.applicationFailureInfo!.details!.payloads![0]]);
      return {
        message: converter.payloadConverter.fromPayload<{ message: string }>(attrs as never).message,
        type: f.applicationFailureInfo!.type!,
        details: converter.payloadConverter.fromPayload(detail as never),
      };
    }),
  );
}

/** `describe`, or null while the workflow does not exist yet. */
const describeOrNull = (workflowId: string) =>
  tw.client.workflow
    .getHandle(workflowId)
    .describe()
    .catch(() => null);

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
    // The 500 and the 503 were failed activities; the attempt attribute counts the attempts made (3, the dispatcher's included).
    expect((await tw.client.workflow.getHandle(deliveryWorkflowId(deliveryIds[0])).describe()).typedSearchAttributes.get(ATTEMPT)).toBe(3);

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
    await until('six attempts', async () => r.hits.length, (n) => n >= 6);
    expect(r.hits).toHaveLength(6);
    const detail = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${deliveryIds[0]}`, headers: auth })).json();
    expect(detail).toMatchObject({ status: 'failed', attempt_count: 6, payload: { event: 'message.status', data: { message_id: 'msg_2', status: 'delivered' } } });
    expect(await sub(s.id)).toMatchObject({ consecutive_failures: 1, last_error: 'HTTP 500', last_failed_at: expect.any(String), status: 'active' });

    // What an operator sees: the exhausted delivery is findable by its status attribute, explains itself, and
    // its steps are labelled. The run stays open, waiting for a retry, as long as the delivery is failed.
    const handle = tw.client.workflow.getHandle(deliveryWorkflowId(deliveryIds[0]));
    const described = await until('the failed status attribute', () => handle.describe(), (d) => d.typedSearchAttributes.get(DELIVERY_STATUS) === 'failed');
    expect(described.status.name).toBe('RUNNING');
    expect(described.typedSearchAttributes.get(ATTEMPT)).toBe(6);
    // `describe` says why (the kind only: attributes are not encrypted; the answer's start is in the failed activity).
    expect(described.typedSearchAttributes.get(LAST_ERROR)).toBe('HTTP 500');
    expect(await described.staticSummary()).toBe(`message.status → ${new URL(r.url).host}`);
    const meta = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(meta.currentDetails).toMatch(/^Run 1: failed after 6 attempts\. Last error: HTTP 500/);
    const summaries = await historySummaries(tw.client, handle.workflowId);
    // Attempt 1 was the dispatcher's: the workflow starts by waiting the first backoff, then attempts 2–6.
    expect(summaries.filter((x: string) => x.startsWith('POST'))).toEqual(['POST, attempt 2/6', 'POST, attempt 3/6', 'POST, attempt 4/6', 'POST, attempt 5/6', 'POST, attempt 6/6']);
    expect(summaries).toEqual(expect.arrayContaining(['backoff before attempt 2/6', 'record: failed after every attempt']));
    expect(await described.staticDetails()).toMatch(/attempt 1 was made by the outbox dispatcher and failed \(HTTP 500\)/);
    // Each failed POST is a failed activity (red in the UI) with the status and the start of the answer.
    const failures = await failedAttempts(handle.workflowId);
    expect(failures).toHaveLength(5);
    expect(failures[0]).toEqual({ message: 'HTTP 500: answer 500', type: 'WebhookHttpError', details: { statusCode: 500, error: 'HTTP 500', responseBody: 'answer 500' } });
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.some((e) => e.activityTaskCompletedEventAttributes)).toBe(false);

    // Cancelled by an operator: the run ends `cancelled` (not `failed`); the API still says failed.
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).typedSearchAttributes.get(DELIVERY_STATUS)).toBe('cancelled');
    expect(await settled(deliveryIds[0])).toBe('failed');
  });

  test('one truth even when the dispatcher\'s word is lost: a run waiting `failed` whose delivery a later run delivered is told by the reconciliation', async () => {
    const r = await receiver([500]);
    await subscribe(r.url);
    const { deliveryIds } = await emit('message.status', { message_id: 'msg_lost', status: 'delivered' });
    expect(await settled(deliveryIds[0])).toBe('failed');
    const handle = tw.client.workflow.getHandle(deliveryWorkflowId(deliveryIds[0]));
    await until('the failed status attribute', () => handle.describe(), (d) => d.typedSearchAttributes.get(DELIVERY_STATUS) === 'failed');
    // As if a retry's attempt 1 was delivered by the dispatcher and its signal never reached the waiting run.
    await db.orm.em.fork().nativeUpdate(WebhookDelivery, { id: deliveryIds[0] }, { status: 'delivered', run: 2, dispatchedAt: new Date() });
    const reconciled = await tw.client.workflow.execute(reconcileStrandedWorkflow, { workflowId: `reconcile-lost-word-${deliveryIds[0]}`, taskQueue: tw.taskQueue, args: [{ graceMs: 0 }] });
    expect(reconciled.deliveryRuns).toBeGreaterThanOrEqual(1);
    await expect(handle.result()).resolves.toBe('delivered');
    expect((await handle.describe()).typedSearchAttributes.get(DELIVERY_STATUS)).toBe('delivered');
    expect(await settled(deliveryIds[0])).toBe('delivered');
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

  test('operator scenario: an outage shows in health and in Temporal; retry now, retry, replay and retry all clear it, and no workflow still says failed', async () => {
    let healthy = false;
    const r = await startHttpsReceiver({ handler: (_req, res) => res.writeHead(healthy ? 204 : 500, { 'content-type': 'text/plain' }).end(healthy ? undefined : 'receiver down') });
    receivers.push(r);
    const s = await subscribe(r.url, ['message.status']);
    const since = new Date(Date.now() - 1000).toISOString();
    // The schedule's last wait is long, so the outage is seen while the deliveries wait in it; "retry now" skips it.
    settings.backoffMs = [50, 50, 50, 50, 60_000];
    let ids: string[];
    try {
      ids = await Promise.all(['msg_a', 'msg_b', 'msg_c'].map(async (m) => (await emit('message.status', { message_id: m })).deliveryIds[0]));
      const [a, b, c] = ids;
      const handles = ids.map((id) => tw.client.workflow.getHandle(deliveryWorkflowId(id)));
      for (const h of handles) await until('the long wait', () => describeOrNull(h.workflowId), (d) => d?.typedSearchAttributes.get(ATTEMPT) === 5 && d.typedSearchAttributes.get(DELIVERY_STATUS) === 'retrying');
      // Retrying: the subscription's health shows the outage (the exhausted-delivery counter alone would not).
      const during = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}`, headers: auth })).json();
      expect(during).toMatchObject({ id: s.id, consecutive_failures: 0, health: { retrying_now: 3, failed_now: 0, failing_since: expect.any(String), last_error: 'HTTP 500', last_delivered_at: null } });
      // "Retry now" skips the 60 s wait: attempt 6 is made at once (and fails: the receiver is still down).
      const started = Date.now();
      for (const id of ids) {
        const now = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${id}/retry-now`, headers: auth });
        expect(now.statusCode).toBe(202);
      }
      for (const id of ids) expect(await settled(id)).toBe('failed');
      expect(Date.now() - started).toBeLessThan(10_000);
      expect((await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${a}/retry-now`, headers: auth })).json()).toMatchObject({ error: 'delivery_not_retrying' });
      const failedList = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-deliveries?status=failed&subscription_id=${s.id}`, headers: auth })).json();
      expect(failedList.deliveries.map((d: { id: string }) => d.id).sort()).toEqual([...ids].sort());
      expect((await sub(s.id)).health).toMatchObject({ retrying_now: 0, failed_now: 3, last_error: 'HTTP 500' });
      // Temporal agrees: three open runs say failed, each attempt a failed activity with the status and the answer's start.
      const failedQuery = `ConciergeWorkspaceId = '${ws}' AND ConciergeDeliveryStatus = 'failed'`;
      await until('three failed runs in visibility', () => tw.client.workflow.count(failedQuery), (n) => n.count === 3);
      expect((await failedAttempts(handles[0].workflowId))[0]).toEqual({ message: 'HTTP 500: receiver down', type: 'WebhookHttpError', details: { statusCode: 500, error: 'HTTP 500', responseBody: 'receiver down' } });

      // The receiver is fixed: retry one, replay the subscription's window for the next, retry all for the rest.
      healthy = true;
      const retried = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${a}/retry`, headers: auth });
      expect(retried.statusCode).toBe(202);
      expect(await workflowResult<string>(tw.client, deliveryWorkflowId(a))).toBe('delivered');
      await maybeRecordHistory(tw.client, deliveryWorkflowId(a), 'webhook-delivery-waits');
      const replay = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${s.id}/replay`, headers: auth, payload: { since, until: new Date(Date.now() + 1000).toISOString() } });
      expect(replay.json()).toMatchObject({ replayed: 2 });
      expect(await settled(b)).toBe('delivered');
      expect(await settled(c)).toBe('delivered');
      // Retry all is idempotent: nothing is failed any more.
      const all = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-deliveries/retry', headers: auth, payload: { subscription_id: s.id } });
      expect(all.statusCode).toBe(202);
      expect(all.json()).toEqual({ retried: 0, delivery_ids: [], more: false });
      for (const id of ids) {
        const d = (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${s.id}/deliveries/${id}`, headers: auth })).json();
        expect(d.attempts.at(-1)).toMatchObject({ run: 2, attempt: 1, status_code: 204 });
        expect(r.hits.at(-1)!.headers['x-concierge-delivery']).toBeDefined();
      }
      // One truth: the runs that waited complete `delivered`; no workflow of the workspace still says failed.
      for (const h of handles) expect(await h.result()).toBe('delivered');
      await until('no failed run in visibility', () => tw.client.workflow.count(failedQuery), (n) => n.count === 0);
      const delivered = await until('three delivered runs', () => tw.client.workflow.count(`ConciergeWorkspaceId = '${ws}' AND ConciergeDeliveryStatus = 'delivered'`), (n) => n.count === 3);
      expect(delivered.count).toBe(3);
      expect((await sub(s.id)).health).toEqual({ failing_since: null, retrying_now: 0, failed_now: 0, last_error: null, last_delivered_at: expect.any(String) });
      expect((await sub(s.id)).consecutive_failures).toBe(0);
    } finally {
      settings.backoffMs = BACKOFF;
    }
  }, 40_000);

  test('a retried run whose attempt 1 fails again continues in the waiting workflow from attempt 2; retry all moves failed deliveries back; deleting the subscription cancels its runs', async () => {
    const r = await receiver([500]);
    const s = await subscribe(r.url, ['message.status']);
    const id = (await emit('message.status', { message_id: 'msg_again' })).deliveryIds[0];
    expect(await settled(id)).toBe('failed');
    const all = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-deliveries/retry', headers: auth, payload: { subscription_id: s.id } });
    expect(all.json()).toEqual({ retried: 1, delivery_ids: [id], more: false });
    // Run 2's attempt 1 (the dispatcher's) fails too: the waiting run carries on with run 2 from attempt 2.
    const h = tw.client.workflow.getHandle(deliveryWorkflowId(id));
    await until('run 2 attempt 2 in the same workflow', () => historySummaries(tw.client, h.workflowId), (x) => x.filter((y) => y === 'POST, attempt 2/6').length === 2);
    const d = await until('run 2 retrying', () => h.query<{ currentDetails?: string }>('__temporal_workflow_metadata'), (m) => /^Run 2: attempt 2\/6 failed: HTTP 500/.test(m.currentDetails ?? ''));
    expect(d.currentDetails).toMatch(/retry-now/);
    const row = await db.orm.em.fork().findOneOrFail(WebhookDelivery, { id });
    expect(row).toMatchObject({ run: 2, status: 'pending' });
    // Deleting the subscription cancels its deliveries' open runs: none is left waiting, none says failed.
    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-subscriptions/${s.id}`, headers: auth })).statusCode).toBe(204);
    await expect(h.result()).rejects.toThrow();
    expect((await h.describe()).typedSearchAttributes.get(DELIVERY_STATUS)).toBe('cancelled');
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
