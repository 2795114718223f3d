// What this measures and how to read it: docs/benchmarks.md#auth-overhead
import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from '@fastify/type-provider-zod';
import { errorsPlugin } from '../api/plugins/errors';
import { folderRoutes } from '../api/routes/kb/folders';
import '../api/types';
import type { AuthenticatedKey } from '../domain/keys/api-keys';
import { openRateStore } from '../lib/ratelimit';
import type { Services } from '../app/services';
import { section, type Cleanup } from './lib/child';
import { loadSettings, measureInterleaved, type LoadTarget } from './lib/load';
import { benchApi, BENCH_REDIS_URL, benchCompose, createKey, listen, setUpBench, UNREACHABLE } from './lib/setup';
import { compareTargets } from './lib/stats';
import type { Result } from './lib/types';

const PATH = '/api/v1/kb/folders';
const FOLDERS = 20;
const TARGET_RATIO = 0.8;

/** The baseline: buildApp's Fastify options, errors plugin and folder routes; one hook sets `request.auth` (docs/benchmarks.md#auth-overhead). */
async function buildBaseline(services: Services, auth: AuthenticatedKey): Promise<FastifyInstance> {
  const genReqId = () => `req_${randomBytes(12).toString('hex')}`;
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024, genReqId, requestIdHeader: false, return503OnClosing: true, routerOptions: { ignoreTrailingSlash: true } }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('auth', null);
  app.addHook('onRequest', async (request) => {
    request.auth = auth;
  });
  await app.register(errorsPlugin);
  await app.register(folderRoutes, { services });
  return app;
}

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const settings = loadSettings();
  const b = await setUpBench(cleanup);
  const { workspaceId } = b;
  const setup = await benchCompose(b, 'cli');
  const key = await createKey(setup.services, workspaceId, ['kb:read']);
  for (let i = 0; i < FOLDERS; i++) await setup.services.folders.create(workspaceId, `Folder ${String(i + 1).padStart(2, '0')}`, null);

  const baseline = await buildBaseline(setup.services, { kind: 'key', id: key.id, workspaceId, scopes: new Set(['kb:read']) });
  cleanup.push(['baseline', () => baseline.close()]);
  const baselineUrl = await listen(baseline);
  const memory = await benchApi(b, { rateStore: 'memory' });
  const redis = await openRateStore('redis', { redisUrl: BENCH_REDIS_URL, databaseUrl: b.db.url });
  cleanup.push(['redis', () => redis.close()]);
  if (redis.store.kind !== 'redis') throw new Error('openRateStore(redis) returned another store');
  const redisClient = redis.store.client;
  cleanup.push(['redis counters', async () => void (await redisClient.del(`concierge_rl_key:${key.id}`, `concierge_rl_workspace:${workspaceId}`))]);
  const redisApi = await benchApi(b, { rateStore: redis.store });

  const headers = { authorization: `Bearer ${key.key}` };
  const targets: LoadTarget[] = [
    { name: 'baseline', url: baselineUrl + PATH, headers },
    { name: 'authed-memory', url: memory.url + PATH, headers },
    { name: 'authed-redis', url: redisApi.url + PATH, headers },
  ];
  // Every side answers 200 with the same body; the authenticated sides refuse a request without a key and count requests.
  const reference = await get(baselineUrl + PATH, headers);
  if (reference.status !== 200) throw new Error(`baseline answered ${reference.status}: ${reference.body}`);
  if ((JSON.parse(reference.body) as { folders: unknown[] }).folders.length !== FOLDERS) throw new Error(`baseline did not list ${FOLDERS} folders`);
  for (const t of targets.slice(1)) {
    const res = await get(t.url, headers);
    if (res.status !== 200 || res.body !== reference.body) throw new Error(`${t.name} answered ${res.status} with another body than the baseline's: ${res.body}`);
    if (res.headers.get('x-ratelimit-limit') !== String(UNREACHABLE)) throw new Error(`${t.name}: X-RateLimit-Limit is ${res.headers.get('x-ratelimit-limit')}, expected ${UNREACHABLE}`);
    if ((await get(t.url)).status !== 401) throw new Error(`${t.name} did not answer 401 without a key`);
  }
  if (!(Number(await redisClient.get(`concierge_rl_key:${key.id}`)) >= 1)) throw new Error('the Redis limiter did not count the verification request');
  log(`  verified: all three answer 200 with the same ${reference.body.length}-byte body (${FOLDERS} folders); authed sides answer 401 without a key`);

  const { runs, summaries } = await measureInterleaved(targets, settings, log);
  return {
    section: 'auth-overhead',
    description: `GET ${PATH} (${FOLDERS} top-level folders): real auth + rate-limit hooks vs the same handler with them bypassed`,
    settings: { ...settings, folders: FOLDERS, limits: UNREACHABLE, order: 'interleaved, alternating direction per round; mean over rounds' },
    runs,
    targets: summaries,
    comparisons: [
      compareTargets(runs, 'auth-overhead (memory store)', 'authed-memory', 'baseline', TARGET_RATIO),
      compareTargets(runs, 'auth-overhead (redis store)', 'authed-redis', 'baseline', TARGET_RATIO),
    ],
  };
}

export const benchAuthOverhead = section(module, 'auth-overhead', measure);
