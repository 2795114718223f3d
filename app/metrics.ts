import http from 'node:http';
import { createHash, timingSafeEqual } from 'node:crypto';
import { AggregatorRegistry, Counter, Gauge, Histogram, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/**
 * The process's Prometheus metrics (issue 28 item 5): one registry per process, in the
 * text exposition format. The API serves it on GET /metrics behind METRICS_TOKEN
 * (api/plugins/metrics.ts), any process on METRICS_HOST:METRICS_PORT (serveMetrics
 * below); the Temporal SDK's own worker metrics have their own listener
 * (TEMPORAL_METRICS_PORT, worker/connection.ts). Counters are incremented where their
 * outcome is recorded, with one call into this module; the backlog gauges are read from
 * PostgreSQL when scraped (backlogSource). Every label's values are bounded: a route is
 * its pattern, never the URL.
 */
import { registry } from '../lib/metrics-registry';

export { registry };
export { countSend, countWebhookAttempt } from '../domain/metrics';

const httpLabels = ['method', 'route', 'status_code'] as const;
const httpRequests = new Counter({ name: 'concierge_http_requests_total', help: 'HTTP requests answered, by method, route pattern and status code', labelNames: httpLabels, registers: [registry] });
const httpDuration = new Histogram({
  name: 'concierge_http_request_duration_seconds',
  help: 'Time to answer an HTTP request, by method, route pattern and status code',
  labelNames: httpLabels,
  // Fast reads to slow uploads and synchronous extractions.
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

/** A request answered: `route` is its pattern (`/api/v1/agents/:id`), or `unmatched` when no route took it. */
export function observeHttp(method: string, route: string | undefined, statusCode: number, seconds: number): void {
  const labels = { method, route: route ?? 'unmatched', status_code: String(statusCode) };
  httpRequests.inc(labels);
  httpDuration.observe(labels, seconds);
}

/** What the database holds that an operator alerts on, read when scraped (app/metrics-backlog.ts). */
export interface Backlog {
  webhooks: { pending: number; retrying: number; oldestPendingSeconds: number };
  indexing: { pending: number; processing: number; oldestSeconds: number };
  voice: { starting: number; live: number };
}

let backlogSource: (() => Promise<Backlog>) | null = null;
let backlogRead: Promise<Backlog | null> | null = null;
let onBacklogError: (err: unknown) => void = () => undefined;

/**
 * The database gauges read from `source` at scrape time (every process that serves metrics
 * registers one; the last registered wins, and its unregister function only clears its own).
 * Concurrent scrapes share one read.
 */
export function setBacklogSource(source: () => Promise<Backlog>, onError: (err: unknown) => void = () => undefined): () => void {
  backlogSource = source;
  onBacklogError = onError;
  return () => {
    if (backlogSource === source) backlogSource = null;
  };
}

/** One read per scrape, shared by the gauges below (each gauge's collect awaits it). */
function readBacklog(): Promise<Backlog | null> {
  if (!backlogSource) return Promise.resolve(null);
  backlogRead ??= backlogSource()
    .catch((err) => {
      onBacklogError(err);
      return null;
    })
    .finally(() => setImmediate(() => (backlogRead = null)));
  return backlogRead;
}

new Gauge({
  name: 'concierge_metrics_database_up',
  help: '1 when the scrape could read the backlog gauges from PostgreSQL, 0 when that read failed (they are absent then)',
  registers: [registry],
  async collect() {
    this.set((await readBacklog()) ? 1 : 0);
  },
});

function dbGauge<L extends string>(name: string, help: string, labelNames: readonly L[], fill: (g: Gauge<L>, b: Backlog) => void): void {
  new Gauge<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    async collect() {
      const b = await readBacklog();
      this.reset();
      if (b) fill(this, b);
    },
  });
}

dbGauge('concierge_webhook_deliveries_backlog', 'Webhook deliveries not settled: pending (in the outbox, first attempt not made) and retrying (handed to their retry workflow)', ['state'], (g, b) => {
  g.set({ state: 'pending' }, b.webhooks.pending);
  g.set({ state: 'retrying' }, b.webhooks.retrying);
});
dbGauge('concierge_webhook_oldest_pending_age_seconds', 'Age of the oldest unsettled webhook delivery (0: none), counted from its creation', [], (g, b) => g.set(b.webhooks.oldestPendingSeconds));
dbGauge('concierge_kb_indexing_backlog', 'Knowledge-base files waiting to be indexed (pending) or being indexed (processing)', ['state'], (g, b) => {
  g.set({ state: 'pending' }, b.indexing.pending);
  g.set({ state: 'processing' }, b.indexing.processing);
});
dbGauge('concierge_kb_indexing_oldest_age_seconds', 'Age of the oldest knowledge-base file pending or processing (0: none)', [], (g, b) => g.set(b.indexing.oldestSeconds));
dbGauge('concierge_voice_sessions', 'Voice sessions open now, by state (starting: not yet joined; live)', ['state'], (g, b) => {
  g.set({ state: 'starting' }, b.voice.starting);
  g.set({ state: 'live' }, b.voice.live);
});

type PeerMetrics = () => Promise<Array<MetricObjectWithValues<MetricValue<string>>>>;
let peerMetrics: PeerMetrics | null = null;

/**
 * Another process's metrics served with this one's (`npm start`'s relay process, which has no listener of its own):
 * merged as prom-client merges a cluster's workers (counters summed, Node's own gauges by their own rule).
 */
export function setPeerMetrics(source: PeerMetrics): () => void {
  peerMetrics = source;
  return () => {
    if (peerMetrics === source) peerMetrics = null;
  };
}

/** This process's metrics as JSON, for the process that serves them (its peer). */
export function metricsJson(): Promise<Array<MetricObjectWithValues<MetricValue<string>>>> {
  return registry.getMetricsAsJSON();
}

/** The exposition text and its content type. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  if (!peerMetrics) return { contentType: registry.contentType, body: await registry.metrics() };
  const [own, peer] = await Promise.all([registry.getMetricsAsJSON(), peerMetrics().catch(() => [])]);
  return { contentType: registry.contentType, body: await AggregatorRegistry.aggregate([own, peer]).metrics() };
}

/** Whether an Authorization header carries the token: compared in constant time, digests first so the length does not leak either. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
  if (!m) return false;
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(m[1].trim()), digest(token));
}

/**
 * A listener of its own for GET /metrics (METRICS_PORT): the worker has no HTTP server,
 * and an API may keep metrics off its public port. It asks for the token too when one is
 * configured. Resolves once listening, with its close function and port.
 */
export async function serveMetrics(host: string, port: number, token: string | null): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) return void res.writeHead(404).end();
    if (token && !bearerMatches(req.headers.authorization, token)) return void res.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
    renderMetrics().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(req.method === 'HEAD' ? undefined : body),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as { port: number }).port;
  return {
    port: bound,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
