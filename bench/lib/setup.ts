// The benchmarks' set-up, through the composition root (app/compose.ts) as the real
// processes build theirs: a scratch database, compositions with the section's overrides,
// an API listening on 127.0.0.1, a worker on a Temporal dev server, keys.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, makeTelemetryFilterString } from '@temporalio/worker';
import { Client } from 'pg';
import { startApi, type ApiOptions } from '../../api/server';
import type { Scope } from '../../domain/keys/scopes';
import { compose, type ComposeOptions, type ComposeOverrides, type Composition, type Role } from '../../app/compose';
import { configSchema, type Config } from '../../app/config';
import { Workspace } from '../../db/entities';
import { openDatabase, type Orm } from '../../db/orm';
import { newId } from '../../lib/ids';
import { createEmbedder, type LocalEmbedder } from '../../providers/embeddings/embedder';
import type { Services } from '../../app/services';
import { findTemporalCli, startDevServer, type DevServer } from '../../dev/embedded/temporal';
import { connectWorker } from '../../worker/connection';
import { installRuntime, startWorker } from '../../worker/runtime';
import { startRelayProcess } from '../../worker/relay-process';
import { lastUserText, startFakeLlm, type FakeLlmOptions } from '../../dev/fakes/fake-llm';
import { OpenAiCompatibleModel } from '../../providers/llm/model';
import type { Cleanup } from './child';

/** The server the scratch databases are made on (its maintenance database). */
export const BENCH_PG_URL = process.env.BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
export const BENCH_REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** One encryption key per bench process (kb-upload-rss hands it to its API process). */
export const BENCH_KEY = randomBytes(32).toString('hex');
/** Limits no run reaches; the limiters still count every request. */
export const UNREACHABLE = 1e9;

/** The embedding model's directory: BENCH_KB_MODELS_DIR, else CONCIERGE_MODELS_DIR, else .data/models. */
export const benchModelsDir = () => path.resolve(process.env.BENCH_KB_MODELS_DIR || process.env.CONCIERGE_MODELS_DIR || path.join(__dirname, '..', '..', '.data', 'models'));

export interface Bench {
  cleanup: Cleanup;
  /** A temporary directory (data dir, blobs, Temporal's SQLite file), removed at the end. */
  dir: string;
  db: { url: string; orm: Orm };
  workspaceId: string;
}

/** A section's temporary directory, a fresh migrated database (dropped at the end) and a workspace in it. */
export async function setUpBench(cleanup: Cleanup): Promise<Bench> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bench-'));
  cleanup.push(['temp dir', async () => fs.rmSync(dir, { recursive: true, force: true })]);
  const url = new URL(BENCH_PG_URL);
  const name = `concierge_bench_${randomBytes(6).toString('hex')}`;
  url.pathname = `/${name}`;
  const orm = await openDatabase(url.toString());
  cleanup.push([
    'database',
    async () => {
      await orm.close(true);
      const admin = new Client({ connectionString: BENCH_PG_URL });
      await admin.connect();
      await admin.query(`drop database if exists "${name}" with (force)`).finally(() => admin.end());
    },
  ]);
  const em = orm.em.fork();
  const ws = em.create(Workspace, { id: newId('ws'), name: 'Bench workspace' });
  await em.flush();
  return { cleanup, dir, db: { url: url.toString(), orm }, workspaceId: ws.id };
}

/** Set to UNREACHABLE in every bench composition. */
const LIFTED_LIMITS = ['RATE_LIMIT_PER_KEY', 'RATE_LIMIT_PER_WORKSPACE', 'WIDGET_RATE_LIMIT_PER_CLIENT', 'WIDGET_SENDS_PER_CONVERSATION', 'WIDGET_REFUSALS_PER_ADDRESS', 'CHAT_MAX_SOCKETS_PER_CONVERSATION', 'CHAT_MAX_SOCKETS_PER_ADDRESS'];

/** The shipped defaults, quiet, limits lifted (a benchmark of 429s is worthless), data in the bench's directory. */
export function benchConfig(dir: string, values: Partial<Config> = {}): Config {
  return {
    ...configSchema.parse({}),
    LOG_LEVEL: (process.env.LOG_LEVEL as Config['LOG_LEVEL']) || 'error',
    CONCIERGE_DATA_DIR: dir,
    CONCIERGE_ENCRYPTION_KEY: BENCH_KEY,
    CONCIERGE_MODELS_DIR: benchModelsDir(),
    REDIS_URL: BENCH_REDIS_URL,
    ...Object.fromEntries(LIFTED_LIMITS.map((k) => [k, UNREACHABLE])),
    ...values,
  };
}

export interface ComposeSettings {
  config?: Partial<Config>;
  overrides?: ComposeOverrides;
  temporalAddress?: string;
  /** A worker's native connection for the composition's client too (worker/connection.ts), as worker/main.ts and `npm start` do. */
  connectWorker?: ComposeOptions['connectWorker'];
}

/** One process's composition on the bench database (its own ORM pool and LISTEN connection), closed at the end. */
export async function benchCompose(b: Bench, role: Role, s: ComposeSettings = {}): Promise<Composition> {
  const c = await compose(benchConfig(b.dir, s.config), { role, databaseUrl: b.db.url, embedded: false, temporalAddress: s.temporalAddress, connectWorker: s.connectWorker, overrides: s.overrides });
  b.cleanup.push([`${role} composition`, () => c.close()]);
  return c;
}

export type BenchApi = Awaited<ReturnType<typeof startApi>> & { c: Composition; url: string; wsUrl: string };

/** An API process (startApi) listening on a free port of 127.0.0.1. */
export async function benchApi(b: Bench, s: ComposeSettings & { rateStore?: ApiOptions['rateStore'] } = {}): Promise<BenchApi> {
  return serveApi(await benchCompose(b, 'api', s), s.rateStore);
}

/** startApi on a composition, listening on a free port of 127.0.0.1 (closed with the composition). */
async function serveApi(c: Composition, rateStore: ApiOptions['rateStore'] = 'memory'): Promise<BenchApi> {
  const { app, chatHub } = await startApi(c, { rateStore, logger: false });
  const url = await listen(app);
  return { c, app, chatHub, url, wsUrl: url.replace(/^http/, 'ws') };
}

export async function listen(app: { listen(o: { host: string; port: number }): Promise<unknown>; server: { address(): unknown } }): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** `temporal server start-dev` with a SQLite file in the bench's directory (as `npm start` runs it). */
export async function benchTemporal(b: Bench): Promise<DevServer> {
  installRuntime({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
  const cli = findTemporalCli({ explicit: process.env.TEMPORAL_CLI_PATH, install: true });
  const dev = await startDevServer({ cli, dbFile: path.join(b.dir, 'temporal.db'), port: 0, uiPort: 0, namespace: 'default', logFile: path.join(b.dir, 'temporal.log') });
  b.cleanup.push(['temporal dev server', () => dev.stop()]);
  return dev;
}

/** A worker process (startWorker: worker, outbox relay, schedules) on the dev server, composed as worker/main.ts does; `instrument` runs before it starts. */
export async function benchWorker(b: Bench, dev: DevServer, s: ComposeSettings = {}, instrument?: (c: Composition) => void, run?: Parameters<typeof startWorker>[1]): Promise<Composition> {
  // As worker/main.ts: the client on the worker's native connection (the relay's starts are eager).
  const c = await benchCompose(b, 'worker', { connectWorker, ...s, temporalAddress: dev.address });
  instrument?.(c);
  await startWorker(c, run);
  return c;
}

export interface StackSettings extends ComposeSettings {
  /** One composition (role both, the API's client on the worker's native connection) as `npm start`; else a worker and an API apart. */
  oneProcess?: boolean;
  /** The API's overrides when apart (default: the worker's). */
  apiOverrides?: ComposeOverrides;
  /** With `oneProcess`: the outbox relay in a process of its own, as `npm start` runs it (CONCIERGE_RELAY_PROCESS=on). */
  relayApart?: boolean;
  /** Runs on the worker's composition before the worker starts. */
  instrument?: (c: Composition) => void;
  onVoiceTurn?: NonNullable<Parameters<typeof startWorker>[1]>['onVoiceTurn'];
}

/** A Temporal dev server, a worker and an API on it: one composition or two (`oneProcess`). */
export async function benchStack(b: Bench, s: StackSettings = {}): Promise<{ dev: DevServer; worker: Composition; api: BenchApi }> {
  const dev = await benchTemporal(b);
  const run = { onVoiceTurn: s.onVoiceTurn };
  if (!s.oneProcess) {
    const worker = await benchWorker(b, dev, s, s.instrument, run);
    return { dev, worker, api: await benchApi(b, { config: s.config, overrides: s.apiOverrides ?? s.overrides, temporalAddress: dev.address }) };
  }
  const c = await benchCompose(b, 'both', { ...s, temporalAddress: dev.address, connectWorker });
  s.instrument?.(c);
  await startWorker(c, { ...run, dispatcher: !s.relayApart });
  if (s.relayApart) {
    // As bin/start.ts: worker/relay-main.ts forked with this composition's configuration (overrides stay here).
    const relay = await startRelayProcess({ config: c.config, databaseUrl: b.db.url, temporalAddress: dev.address });
    b.cleanup.push(['relay process', () => relay.stop()]);
  }
  return { dev, worker: c, api: await serveApi(c) };
}

/** The local embedding model, disposed at the end (pass it as `overrides.embedder: async () => embedder`). */
export function benchEmbedder(b: Bench, threads?: number): LocalEmbedder {
  const embedder = createEmbedder({ provider: 'local', modelsDir: benchModelsDir(), threads }) as LocalEmbedder;
  b.cleanup.push(['embedder', async () => embedder.dispose()]);
  return embedder;
}

/** A plain pg connection LISTENing on `channel` (no hub), closed at the end. */
export async function listenOn(b: Bench, channel: string, on: (payload: string, at: number) => void): Promise<Client> {
  const pg = new Client({ connectionString: b.db.url });
  await pg.connect();
  b.cleanup.push([`listener ${channel}`, () => pg.end()]);
  pg.on('notification', (msg) => msg.channel === channel && on(msg.payload ?? '', performance.now()));
  await pg.query(`listen ${channel}`);
  return pg;
}

/**
 * The fake model (dev/fakes/fake-llm) answering `text` to everything, stopped at the end; `saw(text)`: when a
 * request whose last user message was `text` arrived (performance.now()), once.
 */
export async function benchLlm(b: Bench, text: string, opts: Omit<FakeLlmOptions, 'reply'> = {}) {
  const arrivals = new Map<string, number>();
  const llm = await startFakeLlm({ ...opts, reply: (body) => (arrivals.set(lastUserText(body), performance.now()), { text }) });
  b.cleanup.push(['fake model', () => llm.close()]);
  const settings = { baseUrl: llm.url, model: 'fake-model' };
  const saw = (sent: string) => {
    const at = arrivals.get(sent);
    arrivals.delete(sent);
    return at;
  };
  return { url: llm.url, settings, model: new OpenAiCompatibleModel(settings), saw };
}

export async function createKey(services: Services, workspaceId: string, scopes: Scope[]): Promise<{ id: string; key: string }> {
  const { id, key } = await services.apiKeys.create(workspaceId, 'bench key', scopes);
  return { id, key };
}
