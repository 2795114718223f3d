import { randomBytes } from 'node:crypto';
import { Message, WebhookDelivery } from '../../db/entities';
import { newId } from '../../lib/ids';
import { serveMetrics } from '../../app/metrics';
import { WebhookRepository } from '../../domain/webhooks/emitter';
import type { SendPlan } from '../../domain/messaging/plan';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';

/** The webhook outbox, as the services write it (events are emitted in a transaction of the test's own). */
const webhooks = new WebhookRepository();

/**
 * Prometheus metrics (issue 28 item 5): /metrics is off unless METRICS_TOKEN is set and then
 * wants it; what it exposes is valid text exposition; and the counters and gauges move with
 * what happens (a request, a failed webhook attempt, a send's outcome).
 */
const TOKEN = randomBytes(32).toString('hex');
let db: TestDatabase;
let t: TestApp;
let off: TestApp;
let receiver: HttpsReceiver;
let ws: string;
let auth: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, config: { METRICS_TOKEN: TOKEN } });
  off = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  receiver = await startHttpsReceiver({ handler: (_req, res) => res.writeHead(500).end('upstream broken') });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:read', 'webhooks:read', 'webhooks:write'])).key);
});
afterAll(async () => {
  await receiver?.close();
  await t?.close();
  await off?.close();
  await db?.drop();
});

interface Exposition {
  types: Map<string, string>;
  /** Sample lines as `name{labels}` → value. */
  samples: Map<string, number>;
}

/** Parses Prometheus text exposition strictly: every sample belongs to a family declared by `# TYPE` before it. */
function parse(text: string): Exposition {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.set(type[1], type[2]);
      continue;
    }
    if (line.startsWith('# HELP ')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|[Nn]a[Nn]|[+-]Inf)$/.exec(line);
    if (!sample) throw new Error(`not a valid exposition line: ${line}`);
    const family = sample[1].replace(/_(bucket|sum|count)$/, '');
    if (!types.has(sample[1]) && !types.has(family)) throw new Error(`sample without a # TYPE: ${line}`);
    samples.set(`${sample[1]}${sample[2] ?? ''}`, Number(sample[3]));
  }
  return { types, samples };
}

async function scrape(): Promise<Exposition> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(res.body);
}
const value = (e: Exposition, key: string) => e.samples.get(key) ?? 0;

describe('metrics', () => {
  test('/metrics is 404 without METRICS_TOKEN, 401 without or with a wrong bearer, never asks for an API key', async () => {
    expect((await off.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
    expect((await off.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(404);
    const none = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer');
    expect(none.body).not.toContain('concierge_');
    expect((await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN.slice(1)}x` } })).statusCode).toBe(401);
    // An API key (even a valid one) is not the metrics token.
    expect((await t.app.inject({ method: 'GET', url: '/metrics', headers: auth })).statusCode).toBe(401);
  });

  test('exposes every family named in docs/operations.md, typed, in valid text exposition, with process metrics', async () => {
    const e = await scrape();
    expect(Object.fromEntries([...e.types].filter(([n]) => n.startsWith('concierge_')))).toEqual({
      concierge_http_requests_total: 'counter',
      concierge_http_request_duration_seconds: 'histogram',
      concierge_webhook_attempts_total: 'counter',
      concierge_message_sends_total: 'counter',
      concierge_metrics_database_up: 'gauge',
      concierge_webhook_deliveries_backlog: 'gauge',
      concierge_webhook_oldest_pending_age_seconds: 'gauge',
      concierge_kb_indexing_backlog: 'gauge',
      concierge_kb_indexing_oldest_age_seconds: 'gauge',
      concierge_voice_sessions: 'gauge',
    });
    expect(e.types.get('process_cpu_seconds_total')).toBe('counter');
    expect(e.types.get('nodejs_eventloop_lag_seconds')).toBe('gauge');
    expect(value(e, 'concierge_metrics_database_up')).toBe(1);
    expect(e.samples.has('concierge_voice_sessions{state="live"}')).toBe(true);
    expect(e.samples.has('concierge_kb_indexing_backlog{state="pending"}')).toBe(true);
  });

  test('a request counts under its route pattern and status, and is timed; the raw URL never becomes a label', async () => {
    const key = 'concierge_http_requests_total{method="GET",route="/api/v1/agents/:id",status_code="404"}';
    const count = 'concierge_http_request_duration_seconds_count{method="GET",route="/api/v1/agents/:id",status_code="404"}';
    const before = await scrape();
    const id = `agt_${randomBytes(12).toString('hex')}`;
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/agents/${id}`, headers: auth })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: `/no/such/path/${id}` })).statusCode).toBe(404);
    const after = await scrape();
    expect(value(after, key) - value(before, key)).toBe(1);
    expect(value(after, count) - value(before, count)).toBe(1);
    const unmatched = 'concierge_http_requests_total{method="GET",route="unmatched",status_code="404"}';
    expect(value(after, unmatched) - value(before, unmatched)).toBe(1);
    expect([...after.samples.keys()].some((k) => k.includes(id))).toBe(false);
  });

  test('a failed webhook attempt counts as failed, and the backlog shows its delivery pending, then retrying', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: auth, payload: { url: `${receiver.url}/hooks`, events: ['message.status'] } });
    expect(created.statusCode).toBe(201);
    const before = await scrape();
    await webhooks.emitEvent(db.orm.em.fork(), ws, 'message.status', { message_id: 'msg_metrics', status: 'sent' });
    const [item] = await t.services.deliveries.undispatched(10);
    expect(item).toBeDefined();
    const pending = await scrape();
    expect(value(pending, 'concierge_webhook_deliveries_backlog{state="pending"}') - value(before, 'concierge_webhook_deliveries_backlog{state="pending"}')).toBe(1);
    expect(value(pending, 'concierge_webhook_oldest_pending_age_seconds')).toBeGreaterThan(0);

    const result = await t.services.deliveries.firstAttempt(item);
    expect(result.outcome).toBe('failed_attempt');
    expect(receiver.hits.length).toBe(1);
    // The dispatcher hands a failed first attempt to its retry workflow (worker/webhook-outbox.ts): it leaves the outbox.
    await t.services.deliveries.markDispatched(item.id, item.run);
    const after = await scrape();
    expect(value(after, 'concierge_webhook_attempts_total{outcome="failed"}') - value(before, 'concierge_webhook_attempts_total{outcome="failed"}')).toBe(1);
    expect(value(after, 'concierge_webhook_attempts_total{outcome="delivered"}')).toBe(value(before, 'concierge_webhook_attempts_total{outcome="delivered"}'));
    expect(value(after, 'concierge_webhook_deliveries_backlog{state="retrying"}') - value(before, 'concierge_webhook_deliveries_backlog{state="retrying"}')).toBe(1);
    expect(value(after, 'concierge_webhook_deliveries_backlog{state="pending"}')).toBe(value(before, 'concierge_webhook_deliveries_backlog{state="pending"}'));

    // Settled: it leaves the backlog.
    await db.orm.em.fork().nativeUpdate(WebhookDelivery, { id: item.id }, { status: 'failed' });
    const settled = await scrape();
    expect(value(settled, 'concierge_webhook_deliveries_backlog{state="retrying"}')).toBe(value(before, 'concierge_webhook_deliveries_backlog{state="retrying"}'));
  });

  test("a send's outcome counts once, as sent or failed", async () => {
    const plan = async (): Promise<SendPlan> => {
      const id = newId('msg');
      await db.orm.em.fork().insert(Message, {
        id, workspaceId: ws, direction: 'outbound', source: 'api', channel: 'msgapp', fromNumber: '+15550000001', toNumber: '+15550000002',
        kind: 'text', text: 'hi', content: { type: 'text' }, status: 'sending', statusHistory: [], createdAt: new Date(), updatedAt: new Date(),
      });
      return { messageId: id, workspaceId: ws } as SendPlan;
    };
    const sent = 'concierge_message_sends_total{channel="msgapp",outcome="sent"}';
    const failed = 'concierge_message_sends_total{channel="msgapp",outcome="failed"}';
    const before = await scrape();
    const ok = await plan();
    await t.services.messages.markSent(ok, 'wamid.metrics');
    await t.services.messages.markSent(ok, 'wamid.metrics'); // a repeated step (activity retry) counts nothing more
    const refused = await plan();
    await t.services.messages.markFailed(refused, 'provider refused: (#131026) undeliverable');
    await t.services.messages.markFailed(refused, 'again');
    const after = await scrape();
    expect(value(after, sent) - value(before, sent)).toBe(1);
    expect(value(after, failed) - value(before, failed)).toBe(1);
  });

  test('METRICS_PORT: a listener of its own, asking for the token when one is set', async () => {
    const own = await serveMetrics('127.0.0.1', 0, TOKEN);
    try {
      const url = `http://127.0.0.1:${own.port}`;
      expect((await fetch(`${url}/metrics`)).status).toBe(401);
      expect((await fetch(`${url}/other`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
      const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      expect(parse(await res.text()).types.get('concierge_webhook_attempts_total')).toBe('counter');
    } finally {
      await own.close();
    }
  });
});
