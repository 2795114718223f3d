import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { composeProblems, interpolate, parseCompose, portHostIp, readCompose, ROOT, serviceEnv, type ComposeDoc, type Service } from '../support/compose';

// docker-compose.yml cannot run here (no Docker engine): it is parsed, interpolated the way
// compose does it, and every service's settings are checked against app/config.ts.
// Each rule is shown to fail on a broken copy of the file.

/** What an operator exports before `docker compose up` (docs/deployment.md's command). */
const ENV = { CONCIERGE_ENCRYPTION_KEY: randomBytes(32).toString('hex'), S3_SECRET_ACCESS_KEY: randomBytes(12).toString('hex') };

const real = readCompose();

/** A copy of the file with one change. */
function broken(change: (doc: ComposeDoc) => void): ComposeDoc {
  const doc = structuredClone(real);
  change(doc);
  return doc;
}
const env = (doc: ComposeDoc, service: string) => doc.services[service].environment as Record<string, unknown>;
const deps = (doc: ComposeDoc, service: string) => doc.services[service].depends_on as Record<string, { condition?: string }>;

describe('compose interpolation', () => {
  test('defaults, required variables and the $$ escape behave as in compose', () => {
    expect(interpolate('${A:-x}/${B-y}/${C:-z}', { A: '', B: '', C: 'c' })).toBe('x//c');
    expect(interpolate('$$HOME ${A} $A ${A:+set}', { A: 'a' })).toBe('$HOME a a set');
    expect(interpolate('$${x%%=*}', {})).toBe('${x%%=*}');
    expect(() => interpolate('${KEY:?set it}', { KEY: '' })).toThrow(/required variable KEY is missing a value: set it/);
    expect(interpolate('${KEY?set it}', { KEY: '' })).toBe('');
  });

  test('compose refuses to start without CONCIERGE_ENCRYPTION_KEY or the S3 secret', () => {
    expect(composeProblems(real, { ...ENV, CONCIERGE_ENCRYPTION_KEY: undefined })).toEqual([expect.stringMatching(/required variable CONCIERGE_ENCRYPTION_KEY is missing/)]);
    expect(composeProblems(real, { ...ENV, CONCIERGE_ENCRYPTION_KEY: '' })).toEqual([expect.stringMatching(/required variable CONCIERGE_ENCRYPTION_KEY is missing/)]);
    expect(composeProblems(real, { ...ENV, S3_SECRET_ACCESS_KEY: undefined })).toEqual([expect.stringMatching(/required variable S3_SECRET_ACCESS_KEY is missing/)]);
  });
});

describe('docker-compose.yml', () => {
  test('publishes nothing but the API on every interface: Temporal, its UI, PostgreSQL, Redis and MinIO only on loopback, if at all', () => {
    const published = Object.entries(real.services).flatMap(([name, s]) => ((s.ports as unknown[] | undefined) ?? []).map((p) => [name, portHostIp(p)]));
    for (const [name, ip] of published) {
      if (name !== 'api') expect([name, ip]).toEqual([name, '127.0.0.1']);
    }
    expect(published).toContainEqual(['temporal', '127.0.0.1']);
    expect(published).toContainEqual(['temporal-ui', '127.0.0.1']);
    expect(published).toContainEqual(['api', '']);
  });

  test('the worker media ports are published only by the opt-in override file, and only the worker\'s', () => {
    const media = parseCompose(fs.readFileSync(path.join(ROOT, 'docker-compose.media.yml'), 'utf8'));
    expect(Object.keys(media.services)).toEqual(['worker']);
    expect(media.services.worker.ports).toEqual(['${VOICE_RTP_PORTS}:${VOICE_RTP_PORTS}/udp', '${SIP_RTP_PORTS}:${SIP_RTP_PORTS}/udp']);
  });

  test('passes every check: settings valid for app/config.ts, shared key and storage, order, entries, search attributes', () => {
    expect(composeProblems(real, ENV)).toEqual([]);
  });

  test('api and worker run in production with the same key, storage, database, Temporal and public origin', () => {
    const api = serviceEnv(real.services.api);
    const worker = serviceEnv(real.services.worker);
    for (const e of [api, worker]) {
      expect(e).toMatchObject({ NODE_ENV: 'production', STORAGE_DRIVER: 's3', S3_FORCE_PATH_STYLE: 'true', CONCIERGE_MODELS_DIR: '/app/models' });
      expect(e.CONCIERGE_ENCRYPTION_KEY).toMatch(/^\$\{CONCIERGE_ENCRYPTION_KEY:\?/);
    }
    for (const key of ['CONCIERGE_ENCRYPTION_KEY', 'DATABASE_URL', 'TEMPORAL_ADDRESS', 'PUBLIC_BASE_URL', 'S3_BUCKET', 'S3_ENDPOINT', 'S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY']) {
      expect([key, worker[key]]).toEqual([key, api[key]]);
    }
  });

  // Each rule, on a copy of the file broken the way a hand edit would break it.
  const cases: [string, (doc: ComposeDoc) => void, RegExp][] = [
    ['a typo in a setting name', (d) => (env(d, 'worker').S3_BUKET = 'concierge'), /worker: S3_BUKET is not a setting of app\/config\.ts/],
    ['a value the config schema rejects', (d) => (env(d, 'api').PUBLIC_BASE_URL = 'concierge.example.com'), /api: Invalid configuration:\n\s+PUBLIC_BASE_URL/],
    ['an S3 flag that is not a boolean', (d) => (env(d, 'worker').S3_FORCE_PATH_STYLE = 'maybe'), /worker: Invalid configuration:\n\s+S3_FORCE_PATH_STYLE/],
    ['the worker on another key', (d) => (env(d, 'worker').CONCIERGE_ENCRYPTION_KEY = `\${WORKER_KEY:-${'cd'.repeat(32)}}`), /api and worker differ on CONCIERGE_ENCRYPTION_KEY/],
    ['a key written into the file', (d) => (env(d, 'api').CONCIERGE_ENCRYPTION_KEY = env(d, 'worker').CONCIERGE_ENCRYPTION_KEY = 'ab'.repeat(32)), /api: CONCIERGE_ENCRYPTION_KEY is not required from the environment/],
    ['the key dropped from the worker', (d) => delete env(d, 'worker').CONCIERGE_ENCRYPTION_KEY, /worker: no CONCIERGE_ENCRYPTION_KEY/],
    ['the worker on another SIP trunk', (d) => (env(d, 'worker').SIP_TRUNK_URI = 'sip:elsewhere.example'), /api and worker differ on SIP_TRUNK_URI/],
    ['the worker on another LiveKit SIP trunk', (d) => (env(d, 'worker').LIVEKIT_SIP_TRUNK_ID = 'ST_other'), /api and worker differ on LIVEKIT_SIP_TRUNK_ID/],
    ['the worker on other ICE servers', (d) => (env(d, 'worker').VOICE_ICE_SERVERS = 'stun:stun.example:3478'), /api and worker differ on VOICE_ICE_SERVERS/],
    ['the worker on another bucket', (d) => (env(d, 'worker').S3_BUCKET = 'elsewhere'), /api and worker differ on S3_BUCKET/],
    ['local storage in two containers', (d) => (env(d, 'api').STORAGE_DRIVER = env(d, 'worker').STORAGE_DRIVER = 'local'), /api: STORAGE_DRIVER=local, but .* is not a named volume/],
    ['s3 without a bucket', (d) => (env(d, 'api').S3_BUCKET = env(d, 'worker').S3_BUCKET = ''), /api: Invalid configuration:\s+S3_BUCKET: required with STORAGE_DRIVER=s3/],
    ['a bucket the one-shot does not create', (d) => (env(d, 'minio-bucket').S3_BUCKET = 'other'), /minio-bucket: creates bucket other, the processes use concierge/],
    ['MinIO on other credentials', (d) => (env(d, 'minio').MINIO_ROOT_USER = 'root'), /minio: its credentials are not S3_ACCESS_KEY_ID/],
    ['no PUBLIC_BASE_URL', (d) => delete env(d, 'worker').PUBLIC_BASE_URL, /worker: no PUBLIC_BASE_URL/],
    ['NODE_ENV left at development', (d) => (env(d, 'api').NODE_ENV = 'development'), /api: NODE_ENV is development, not production/],
    ['models where the image has none', (d) => (env(d, 'api').CONCIERGE_MODELS_DIR = env(d, 'worker').CONCIERGE_MODELS_DIR = '/models'), /api: CONCIERGE_MODELS_DIR \(\/models\) is neither baked/],
    ['depends_on a service that does not exist', (d) => (deps(d, 'api').postgress = { condition: 'service_healthy' }), /api: depends_on names no service: postgress/],
    ['waiting for health that is never reported', (d) => delete (d.services.redis as Service).healthcheck, /api: waits for redis to be healthy, but redis has no healthcheck/],
    ['a one-shot that restarts', (d) => (d.services['minio-bucket'].restart = 'always'), /api: waits for minio-bucket to complete, but minio-bucket restarts/],
    ['a command npm run build does not produce', (d) => (d.services.api.command = ['node', 'dist/api/mian.js']), /api: command .* does not run a file npm run build produces/],
    ['the source entry instead of the build', (d) => (d.services.worker.command = ['node', '--import', 'tsx', 'worker/main.ts']), /worker: command .* does not run a file npm run build produces/],
    ['the worker running the API', (d) => (d.services.worker.command = ['node', 'dist/api/main.js']), /worker: runs dist\/api\/main\.js, not dist\/worker\/main\.js/],
    ['a search attribute missing', (d) => (env(d, 'temporal-search-attributes').SEARCH_ATTRIBUTES = 'ConciergeWorkspaceId=Keyword'), /temporal-search-attributes: registers ConciergeWorkspaceId=Keyword, the worker defines/],
    ['a search attribute of another type', (d) => (env(d, 'temporal-search-attributes').SEARCH_ATTRIBUTES = String(env(d, 'temporal-search-attributes').SEARCH_ATTRIBUTES).replace('ConciergeFileId=Keyword', 'ConciergeFileId=Text')), /registers .*ConciergeFileId=Text/],
    ['search attributes in another namespace', (d) => (env(d, 'temporal-search-attributes').NAMESPACE = 'concierge'), /registers in namespace concierge, the processes use default/],
    ['the worker not waiting for the search attributes', (d) => delete deps(d, 'worker')['temporal-search-attributes'], /worker: does not wait for temporal-search-attributes to complete/],
    ['no service registering them', (d) => delete d.services['temporal-search-attributes'], /no service registers the search attributes/],
    ['Temporal published on every interface', (d) => (d.services.temporal.ports = ['7233:7233']), /temporal: publishes 7233:7233 on every interface/],
    ['the Temporal UI published on every interface', (d) => (d.services['temporal-ui'].ports = ['8233:8080']), /temporal-ui: publishes 8233:8080 on every interface/],
    ['PostgreSQL published on 0.0.0.0', (d) => (d.services.postgres.ports = ['0.0.0.0:5432:5432']), /postgres: publishes 0\.0\.0\.0:5432:5432 on every interface/],
    ['Redis published with the long syntax', (d) => (d.services.redis.ports = [{ target: 6379, published: 6379 }]), /redis: publishes .*6379.* on every interface/],
    ['MinIO published on every IPv6 interface', (d) => (d.services.minio.ports = ['[::]:9000:9000']), /minio: publishes \[::\]:9000:9000 on every interface/],
    ['the worker publishing its media ports without the opt-in file', (d) => (d.services.worker.ports = ['40000-40100:40000-40100/udp']), /worker: publishes 40000-40100:40000-40100\/udp on every interface/],
  ];
  test.each(cases)('fails on %s', (_what, change, expected) => {
    const problems = composeProblems(broken(change), ENV);
    expect(problems).toContainEqual(expect.stringMatching(expected));
  });
});
