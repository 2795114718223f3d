import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { parse } from 'yaml';
import { configSchema, loadConfig, type Config } from '../../app/config';
import { ALL_SEARCH_ATTRIBUTES } from '../../worker/namespace-attributes';

/**
 * A static check of docker-compose.yml (no Docker engine here): interpolation the way
 * compose does it, then every rule the production stack relies on. Each rule reports a
 * problem string; the test checks the real file has none and that each rule fires on a
 * broken copy.
 */

export const ROOT = path.resolve(__dirname, '../..');

/** The two processes of the image, and the source entry each must run. */
export const ENTRIES = { api: 'api/main.ts', worker: 'worker/main.ts' } as const;
type Role = keyof typeof ENTRIES;

/**
 * Settings both processes must agree on: one key, one blob store, one database, one Temporal, one public origin, and
 * one voice set-up (the API decides from them what the widget offers and which dial-out to use; the worker runs it).
 */
export const SHARED_SETTINGS = [
  'CONCIERGE_ENCRYPTION_KEY',
  'STORAGE_DRIVER',
  'CONCIERGE_STORAGE_DIR',
  'S3_BUCKET',
  'S3_ENDPOINT',
  'S3_REGION',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'S3_FORCE_PATH_STYLE',
  'DATABASE_URL',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_TASK_QUEUE',
  'TEMPORAL_PAYLOAD_KEY_VERSION',
  'PUBLIC_BASE_URL',
  'CONCIERGE_MODELS_DIR',
  'LIVEKIT_URL',
  'LIVEKIT_API_KEY',
  'LIVEKIT_API_SECRET',
  'LIVEKIT_SIP_TRUNK_ID',
  'VOICE_ICE_SERVERS',
  'SIP_TRUNK_URI',
  'SIP_FROM_NUMBER',
  'SIP_USERNAME',
  'SIP_PASSWORD',
] as const satisfies readonly (keyof Config)[];

export type ComposeDoc = { services: Record<string, Service>; [k: string]: unknown };
export interface Service {
  image?: string;
  build?: unknown;
  command?: string | string[];
  entrypoint?: string | string[];
  environment?: Record<string, unknown> | string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: unknown;
  volumes?: (string | { source?: string; target?: string })[];
  restart?: string;
  [k: string]: unknown;
}

export class InterpolationError extends Error {}

/**
 * Compose's interpolation of one value: `$$` is a literal `$`; `${VAR}`, `$VAR`;
 * `${VAR:-default}` (unset or empty) and `${VAR-default}` (unset); `${VAR:?message}` and
 * `${VAR?message}` refuse to start; `${VAR:+alt}` and `${VAR+alt}`.
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (whole, head, name, op, arg, bare) => {
    if (head === '$') return '$';
    if (bare) return env[bare] ?? '';
    if (head.startsWith('{') && name === undefined) throw new InterpolationError(`invalid interpolation: ${whole}`);
    const v = env[name];
    const set = v !== undefined;
    const nonEmpty = set && v !== '';
    switch (op) {
      case undefined:
        return v ?? '';
      case ':-':
        return nonEmpty ? v! : interpolate(arg, env);
      case '-':
        return set ? v! : interpolate(arg, env);
      case ':?':
        if (!nonEmpty) throw new InterpolationError(`required variable ${name} is missing a value: ${arg}`);
        return v!;
      case '?':
        if (!set) throw new InterpolationError(`required variable ${name} is missing a value: ${arg}`);
        return v!;
      case ':+':
        return nonEmpty ? interpolate(arg, env) : '';
      case '+':
        return set ? interpolate(arg, env) : '';
      default:
        throw new InterpolationError(`invalid interpolation: ${whole}`);
    }
  });
}

/** Every string of the document interpolated (compose interpolates values, not keys). */
export function interpolateDoc<T>(doc: T, env: Record<string, string | undefined>): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return interpolate(v, env);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(doc) as T;
}

/** The file as compose reads it: YAML with anchors and `<<` merge keys. */
export function parseCompose(text: string): ComposeDoc {
  return parse(text, { merge: true }) as ComposeDoc;
}

export const readCompose = (file = path.join(ROOT, 'docker-compose.yml')) => parseCompose(fs.readFileSync(file, 'utf8'));

/** A service's environment as strings (map or `KEY=value` list; compose stringifies numbers and booleans). */
export function serviceEnv(service: Service): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((line) => [line.split('=', 1)[0], line.includes('=') ? line.slice(line.indexOf('=') + 1) : '']));
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === null || v === undefined ? '' : String(v)]));
}

const dependsOn = (service: Service): Record<string, string> =>
  Array.isArray(service.depends_on)
    ? Object.fromEntries(service.depends_on.map((n) => [n, 'service_started']))
    : Object.fromEntries(Object.entries(service.depends_on ?? {}).map(([n, d]) => [n, d?.condition ?? 'service_started']));

const argv = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : v.split(/\s+/).filter(Boolean));

/** What the image holds, from the Dockerfile's last stage: its ENV and the directories COPY fills. */
export function imageFacts(dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')) {
  const lines = dockerfile.split('\n').map((l) => l.trim());
  const last = lines.map((l, i) => (/^FROM\s/i.test(l) ? i : -1)).filter((i) => i >= 0).pop() ?? 0;
  const env: Record<string, string> = {};
  const dirs: string[] = [];
  let workdir = '/';
  for (const line of lines.slice(last)) {
    const [op, ...rest] = line.split(/\s+/);
    if (/^WORKDIR$/i.test(op)) workdir = path.posix.resolve(workdir, rest[0]);
    if (/^ENV$/i.test(op)) for (const kv of rest) if (kv.includes('=')) env[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1);
    if (/^COPY$/i.test(op)) dirs.push(path.posix.resolve(workdir, rest[rest.length - 1]));
  }
  return { env, dirs, workdir };
}

/** The files `npm run build` writes: tsconfig.build.json's files under its outDir, and the prebuilt workflow bundle. */
export function buildOutputs(): Set<string> {
  const file = path.join(ROOT, 'tsconfig.build.json');
  const { config, error } = ts.readConfigFile(file, ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, ROOT, undefined, file);
  const outDir = path.relative(ROOT, parsed.options.outDir!);
  const rootDir = parsed.options.rootDir!;
  const outputs = parsed.fileNames.map((f) => path.posix.join(outDir, path.relative(rootDir, f).replace(/\.ts$/, '.js')));
  return new Set(outputs);
}

/** storageDir() of app/config.ts, inside the container (relative paths from its WORKDIR, not this checkout). */
const containerStorageDir = (c: Config, workdir: string) => path.posix.resolve(workdir, c.CONCIERGE_STORAGE_DIR ?? path.posix.join(c.CONCIERGE_DATA_DIR, 'blobs'));

const CLI_TYPE: Record<string, string> = { TEXT: 'Text', KEYWORD: 'Keyword', INT: 'Int', DOUBLE: 'Double', BOOL: 'Bool', DATETIME: 'Datetime', KEYWORD_LIST: 'KeywordList' };

/** Everything wrong with the compose file for this environment (the variables `docker compose` would see). */
export function composeProblems(raw: ComposeDoc, env: Record<string, string | undefined>): string[] {
  const problems: string[] = [];
  let doc: ComposeDoc;
  try {
    doc = interpolateDoc(raw, env);
  } catch (err) {
    return [`interpolation: ${(err as Error).message}`];
  }
  const services = doc.services ?? {};
  const image = imageFacts();

  for (const [name, service] of Object.entries(services)) {
    for (const [dep, condition] of Object.entries(dependsOn(service))) {
      const target = services[dep];
      if (!target) problems.push(`${name}: depends_on names no service: ${dep}`);
      else if (condition === 'service_healthy' && !target.healthcheck) problems.push(`${name}: waits for ${dep} to be healthy, but ${dep} has no healthcheck`);
      else if (condition === 'service_completed_successfully' && target.restart && target.restart !== 'no') problems.push(`${name}: waits for ${dep} to complete, but ${dep} restarts (${target.restart})`);
    }
  }

  const known = new Set(Object.keys(configSchema.shape));
  const configs: Partial<Record<Role, Config>> = {};
  const outputs = buildOutputs();
  for (const role of Object.keys(ENTRIES) as Role[]) {
    const service = services[role];
    if (!service) {
      problems.push(`no ${role} service`);
      continue;
    }
    const own = serviceEnv(service);
    for (const key of Object.keys(own)) if (!known.has(key)) problems.push(`${role}: ${key} is not a setting of app/config.ts`);
    const cmd = argv(service.command);
    const entry = cmd[0] === 'node' ? cmd[1] : undefined;
    const expected = path.posix.join('dist', ENTRIES[role].replace(/\.ts$/, '.js'));
    if (!entry || !outputs.has(entry)) problems.push(`${role}: command ${JSON.stringify(cmd)} does not run a file npm run build produces`);
    else if (entry !== expected) problems.push(`${role}: runs ${entry}, not ${expected}`);
    try {
      // What the process sees: the image's ENV, overridden by the service's environment.
      configs[role] = loadConfig({ ...image.env, ...own });
    } catch (err) {
      problems.push(`${role}: ${(err as Error).message}`);
      continue;
    }
    const c = configs[role]!;
    if (c.NODE_ENV !== 'production') problems.push(`${role}: NODE_ENV is ${c.NODE_ENV}, not production`);
    if (!c.CONCIERGE_ENCRYPTION_KEY) problems.push(`${role}: no CONCIERGE_ENCRYPTION_KEY`);
    if (!c.PUBLIC_BASE_URL) problems.push(`${role}: no PUBLIC_BASE_URL`);
    if (!c.DATABASE_URL) problems.push(`${role}: no DATABASE_URL`);
    if (!c.TEMPORAL_ADDRESS) problems.push(`${role}: no TEMPORAL_ADDRESS`);
    const mounts = (service.volumes ?? []).map((v) => (typeof v === 'string' ? { source: v.split(':')[0], target: v.split(':')[1] } : v));
    const models = c.CONCIERGE_MODELS_DIR;
    if (!models || !(image.dirs.includes(models) || mounts.some((m) => m.target === models))) {
      problems.push(`${role}: CONCIERGE_MODELS_DIR (${models ?? 'unset'}) is neither baked into the image nor a mounted volume`);
    }
    if (c.STORAGE_DRIVER === 'local' && !mounts.some((m) => m.target === containerStorageDir(c, image.workdir) && m.source && !m.source.startsWith('.') && !m.source.startsWith('/'))) {
      problems.push(`${role}: STORAGE_DRIVER=local, but ${containerStorageDir(c, image.workdir)} is not a named volume the other process can mount`);
    }
  }

  const { api, worker } = configs;
  if (api && worker) {
    for (const key of SHARED_SETTINGS) {
      if (JSON.stringify(api[key]) !== JSON.stringify(worker[key])) problems.push(`api and worker differ on ${key}`);
    }
    if (api.STORAGE_DRIVER === 'local') {
      const volumeAt = (role: Role) => (services[role].volumes ?? []).find((v) => typeof v === 'string' && v.split(':')[1] === containerStorageDir(configs[role]!, image.workdir));
      if (volumeAt('api') !== volumeAt('worker')) problems.push('api and worker do not mount the same storage volume');
    }
  }

  // The key must come from the operator's environment, never a value written in this file.
  if (api || worker) {
    const withoutKey = { ...env, CONCIERGE_ENCRYPTION_KEY: undefined };
    for (const role of Object.keys(ENTRIES) as Role[]) {
      const rawEnv = raw.services?.[role] ? serviceEnv(raw.services[role]) : {};
      let refused = false;
      try {
        interpolate(rawEnv.CONCIERGE_ENCRYPTION_KEY ?? '', withoutKey);
      } catch (err) {
        refused = err instanceof InterpolationError && /CONCIERGE_ENCRYPTION_KEY/.test(err.message);
      }
      if (!refused) problems.push(`${role}: CONCIERGE_ENCRYPTION_KEY is not required from the environment (\${CONCIERGE_ENCRYPTION_KEY:?...})`);
    }
  }

  // The S3 store: the bucket the processes use is the one a one-shot creates, with the credentials MinIO runs with.
  if (api?.STORAGE_DRIVER === 's3') {
    const host = api.S3_ENDPOINT ? new URL(api.S3_ENDPOINT).hostname : undefined;
    const store = host ? services[host] : undefined;
    if (host && services[host] === undefined) problems.push(`S3_ENDPOINT names no service: ${host}`);
    if (host && store) {
      const storeEnv = serviceEnv(store);
      if (storeEnv.MINIO_ROOT_USER !== api.S3_ACCESS_KEY_ID || storeEnv.MINIO_ROOT_PASSWORD !== api.S3_SECRET_ACCESS_KEY) {
        problems.push(`${host}: its credentials are not S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY of the API`);
      }
      const creator = Object.entries(services).find(([, s]) => /\bmc mb\b/.test(argv(s.command).join(' ')) && dependsOn(s)[host]);
      if (!creator) problems.push(`no one-shot service creates the bucket on ${host}`);
      else {
        const [creatorName, creatorService] = creator;
        if (serviceEnv(creatorService).S3_BUCKET !== api.S3_BUCKET) problems.push(`${creatorName}: creates bucket ${serviceEnv(creatorService).S3_BUCKET}, the processes use ${api.S3_BUCKET}`);
        for (const role of Object.keys(ENTRIES) as Role[]) {
          if (dependsOn(services[role])[creatorName] !== 'service_completed_successfully') problems.push(`${role}: does not wait for ${creatorName} to complete`);
        }
      }
    }
  }

  // The search attributes: registered by a one-shot before either process starts, the worker's own list.
  const registrar = Object.entries(services).find(([, s]) => /temporal operator search-attribute create/.test(argv(s.command).join(' ')));
  if (!registrar) problems.push('no service registers the search attributes');
  else {
    const [regName, reg] = registrar;
    const regEnv = serviceEnv(reg);
    const script = argv(reg.command).join(' ');
    // The script must create what the list says, in the namespace it names (after interpolation: `$VAR`).
    if (!/\$\{?SEARCH_ATTRIBUTES\b/.test(script) || !/\$\{?NAMESPACE\b/.test(script)) problems.push(`${regName}: its command does not use $SEARCH_ATTRIBUTES and $NAMESPACE`);
    const declared = (regEnv.SEARCH_ATTRIBUTES ?? '').split(/\s+/).filter(Boolean).sort();
    const wanted = ALL_SEARCH_ATTRIBUTES.map((k) => `${k.name}=${CLI_TYPE[String(k.type)]}`).sort();
    if (JSON.stringify(declared) !== JSON.stringify(wanted)) problems.push(`${regName}: registers ${declared.join(' ') || 'nothing'}, the worker defines ${wanted.join(' ')}`);
    if (api && regEnv.NAMESPACE !== api.TEMPORAL_NAMESPACE) problems.push(`${regName}: registers in namespace ${regEnv.NAMESPACE}, the processes use ${api.TEMPORAL_NAMESPACE}`);
    for (const role of Object.keys(ENTRIES) as Role[]) {
      if (services[role] && dependsOn(services[role])[regName] !== 'service_completed_successfully') problems.push(`${role}: does not wait for ${regName} to complete`);
    }
  }
  problems.push(...publishedPorts(services));
  return problems;
}

/** Services that may publish on every interface (the API); the worker's media ports come only from the opt-in override file. */
export const PUBLIC_SERVICES = new Set(['api']);

/** The host addresses a port entry binds: short syntax `[ip:][host:]container[/proto]` or the long syntax. */
export function portHostIp(entry: unknown): string {
  if (entry && typeof entry === 'object') return String((entry as { host_ip?: string }).host_ip ?? '');
  const spec = String(entry).replace(/\/(tcp|udp|sctp)$/, '');
  // `[::1]:7233:7233`, `127.0.0.1:7233:7233`: an address only when three parts remain after it.
  const v6 = /^\[([^\]]+)\]:/.exec(spec);
  if (v6) return v6[1];
  const parts = spec.split(':');
  return parts.length === 3 ? parts[0] : '';
}

const ALL_INTERFACES = new Set(['', '0.0.0.0', '::', '[::]']);

/**
 * Nothing but the API is published on every interface: Temporal's frontend and UI have no
 * authentication, PostgreSQL, Redis and MinIO are the processes' own. Loopback bindings are fine.
 */
function publishedPorts(services: Record<string, Service>): string[] {
  const problems: string[] = [];
  for (const [name, service] of Object.entries(services)) {
    if (PUBLIC_SERVICES.has(name)) continue;
    if (service.network_mode === 'host') problems.push(`${name}: network_mode host publishes every port it listens on`);
    for (const entry of (service.ports as unknown[] | undefined) ?? []) {
      const ip = portHostIp(entry);
      if (ALL_INTERFACES.has(ip)) problems.push(`${name}: publishes ${typeof entry === 'object' ? JSON.stringify(entry) : String(entry)} on every interface (bind it to 127.0.0.1)`);
    }
  }
  return problems;
}
