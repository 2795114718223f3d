import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from '@fastify/type-provider-zod';
import pino from 'pino';
import { buildApp } from '../api/app';
import { errorsPlugin } from '../api/plugins/errors';
import { folderRoutes } from '../api/routes/kb/folders';
import '../api/types';
import type { AuthenticatedKey } from '../core/auth/api-keys';
import { KeyCache } from '../core/auth/key-cache';
import { createRequestLimits, openRateStore } from '../core/ratelimit';
import { SecretBox } from '../core/crypto/secret-box';
import { policyFromCidrs } from '../core/net/ssrf';
import { createServices, type ServiceOptions, type Services } from '../core/services';
import { BENCH_REDIS_URL, createBenchDatabase, createKey, createWorkspace } from './lib/db';
import { unusedKbOptions } from './lib/services';
import { listen, loadSettings, measureInterleaved, type LoadTarget } from './lib/load';
import type { Comparison, Result } from './lib/types';

const box = new SecretBox(randomBytes(32));
/** Webhook and knowledge-base settings are unused by this section; the services still need them. */
const benchServiceOptions = (kb: Pick<ServiceOptions, 'blobs' | 'embedder'>): ServiceOptions => ({
  idempotencyTtlHours: 24,
  box,
  sender: { policy: policyFromCidrs(''), timeoutMs: 10_000 },
  ...kb,
});

const PATH = '/api/v1/kb/folders';
const FOLDERS = 20;
/** Limits no run can reach (≈ 17 million requests/s over the one-minute window); the limiter still counts every request. */
const UNREACHABLE_LIMIT = 1e9;
const BODY_LIMIT_BYTES = 1024 * 1024;
const TARGET_RATIO = 0.8;

/**
 * The baseline: the same handler with the auth and rate-limit hooks bypassed. A bare
 * Fastify instance with buildApp's constructor options, compilers and decorations, the
 * errors plugin and the folder routes, and one onRequest hook that sets `request.auth`
 * to the benchmark key (no header parsing, no hashing, no cache, no limiter). The
 * routes' `config.scope` is ignored here since nothing reads it. buildApp's other
 * plugins (X-Request-Id hook, idempotency hooks, OpenAPI) are not registered, so the
 * ratio charges them to the authenticated side as well.
 */
async function buildBaseline(services: Services, auth: AuthenticatedKey): Promise<FastifyInstance> {
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => `req_${randomBytes(12).toString('hex')}`,
    requestIdHeader: false,
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.removeContentTypeParser('text/plain');
  app.decorate('services', services);
  app.decorateRequest('auth', null);
  app.addHook('onRequest', async (request) => {
    request.auth = auth;
  });
  await app.register(errorsPlugin);
  await app.register(folderRoutes);
  return app;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Headers }> {
  const res = await fetch(url, { headers });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/**
 * Authenticated `GET /api/v1/kb/folders` (the real buildApp: key look-up through the
 * LISTEN/NOTIFY key cache, per-key and per-workspace limiters) against the baseline
 * above, once with the in-memory limiter store and once with the Redis store.
 */
export async function benchAuthOverhead(log: (line: string) => void = console.log): Promise<Result> {
  const settings = loadSettings();
  const quiet = pino({ level: 'silent' });
  const cleanup: Array<() => Promise<void>> = [];
  const kb = unusedKbOptions();
  cleanup.push(kb.cleanup);
  const db = await createBenchDatabase();
  cleanup.push(() => db.drop());
  try {
    const setupServices = createServices(db.orm.em, benchServiceOptions(kb.options));
    const workspaceId = await createWorkspace(db.orm);
    const key = await createKey(setupServices, workspaceId, ['kb:read']);
    for (let i = 0; i < FOLDERS; i++) {
      await setupServices.folders.create(workspaceId, `Folder ${String(i + 1).padStart(2, '0')}`, null);
    }

    // Baseline.
    const baseline = await buildBaseline(createServices(db.orm.em, benchServiceOptions(kb.options)), {
      id: key.id,
      workspaceId,
      scopes: new Set(['kb:read']),
    });
    cleanup.push(() => baseline.close());
    const baselineUrl = await listen(baseline);

    // The real app, as one API process builds it, over a given limiter store.
    const startAuthed = async (store: Parameters<typeof createRequestLimits>[0]) => {
      const keyCache = new KeyCache(db.url, quiet);
      await keyCache.start();
      cleanup.push(() => keyCache.stop());
      const limits = await createRequestLimits(store, UNREACHABLE_LIMIT, UNREACHABLE_LIMIT);
      const services = createServices(db.orm.em, { ...benchServiceOptions(kb.options), keyCache });
      const app = await buildApp({ services, limits, bodyLimitBytes: BODY_LIMIT_BYTES });
      cleanup.push(() => app.close());
      return listen(app);
    };
    const memoryUrl = await startAuthed({ kind: 'memory' });
    const redis = await openRateStore('redis', { redisUrl: BENCH_REDIS_URL, databaseUrl: db.url });
    cleanup.push(() => redis.close());
    if (redis.store.kind !== 'redis') throw new Error('openRateStore(redis) returned another store');
    const redisClient = redis.store.client;
    cleanup.push(async () => void (await redisClient.del(`concierge_rl_key:${key.id}`, `concierge_rl_workspace:${workspaceId}`)));
    const redisUrl = await startAuthed(redis.store);

    // Every target gets the same request, Authorization header included.
    const headers = { authorization: `Bearer ${key.key}` };
    const targets: LoadTarget[] = [
      { name: 'baseline', url: baselineUrl + PATH, headers },
      { name: 'authed-memory', url: memoryUrl + PATH, headers },
      { name: 'authed-redis', url: redisUrl + PATH, headers },
    ];

    // Before measuring: every side answers 200 with the same body; the authenticated
    // sides refuse a request without a key and count the request in their limiter.
    const reference = await get(baselineUrl + PATH, headers);
    if (reference.status !== 200) throw new Error(`baseline answered ${reference.status}: ${reference.body}`);
    const folders = (JSON.parse(reference.body) as { folders: unknown[] }).folders;
    if (folders.length !== FOLDERS) throw new Error(`baseline listed ${folders.length} folders, expected ${FOLDERS}`);
    for (const t of targets.slice(1)) {
      const res = await get(t.url, headers);
      if (res.status !== 200) throw new Error(`${t.name} answered ${res.status}: ${res.body}`);
      if (res.body !== reference.body) throw new Error(`${t.name} answered a body other than the baseline's:\n${res.body}\nvs\n${reference.body}`);
      if (res.headers.get('x-ratelimit-limit') !== String(UNREACHABLE_LIMIT)) {
        throw new Error(`${t.name}: X-RateLimit-Limit is ${res.headers.get('x-ratelimit-limit')}, expected ${UNREACHABLE_LIMIT}`);
      }
      const anonymous = await get(t.url);
      if (anonymous.status !== 401) throw new Error(`${t.name} answered ${anonymous.status} without a key, expected 401`);
    }
    const counted = Number(await redisClient.get(`concierge_rl_key:${key.id}`));
    if (!(counted >= 1)) throw new Error(`the Redis limiter did not count the verification request (counter: ${counted})`);
    log(`  verified: all three answer 200 with the same ${reference.body.length}-byte body (${FOLDERS} folders); authed sides answer 401 without a key`);

    const { runs, summaries } = await measureInterleaved(targets, settings, log);
    const rps = (name: string) => summaries.find((s) => s.target === name)!.meanRequestsPerSec;
    const best = (name: string) => summaries.find((s) => s.target === name)!.bestRequestsPerSec;
    const compare = (name: string, subject: string): Comparison => {
      const ratio = rps(subject) / rps('baseline');
      const inRound = (name: string, round: number) => runs.find((r) => r.target === name && r.round === round)!.requestsPerSec;
      const rounds = [...new Set(runs.filter((r) => r.round > 0).map((r) => r.round))];
      return {
        name,
        subject,
        baseline: 'baseline',
        subjectRequestsPerSec: rps(subject),
        baselineRequestsPerSec: rps('baseline'),
        ratio,
        bestRatio: best(subject) / best('baseline'),
        roundRatios: rounds.map((k) => inRound(subject, k) / inRound('baseline', k)),
        target: TARGET_RATIO,
        pass: ratio >= TARGET_RATIO,
      };
    };
    return {
      section: 'auth-overhead',
      description: `GET ${PATH} (${FOLDERS} top-level folders): real auth + rate-limit hooks vs the same handler with them bypassed`,
      settings: { ...settings, folders: FOLDERS, limits: UNREACHABLE_LIMIT, order: 'interleaved, alternating direction per round; mean over rounds' },
      runs,
      targets: summaries,
      comparisons: [compare('auth-overhead (memory store)', 'authed-memory'), compare('auth-overhead (redis store)', 'authed-redis')],
    };
  } finally {
    // Servers first, then what they use; the database last.
    for (const fn of cleanup.reverse()) {
      await fn().catch((err: unknown) => log(`  cleanup failed: ${err instanceof Error ? err.message : String(err)}`));
    }
  }
}
