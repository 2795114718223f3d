import type { VoiceOverrides } from '../../app/voice';
import type { FastifyInstance } from 'fastify';
import type { Client } from '@temporalio/client';
import { loggerOptions } from '../../api/app';
import type { ChatHub, SocketCaps } from '../../api/chat-hub';
import { startApi } from '../../api/server';
import { compose, lazyEmbedder, type Composition, type ComposeOptions, type ComposeOverrides, type Role } from '../../app/compose';
import { configSchema, type Config } from '../../app/config';
import type { Scope } from '../../domain/keys/scopes';
import type { Orm } from '../../db/orm';
import type { RateStore, WidgetLimits } from '../../lib/ratelimit';
import type { ServiceOptions, Services } from '../../app/services';
import { DEFAULT_STRUCTURED } from '../../domain/extraction/extractions';
import { SecretBox } from '../../lib/crypto/secret-box';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { createTestPki } from '../../dev/fakes/tls';
import { LOCAL_ICE_CIDRS } from './ice';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEmbedder } from '../../providers/embeddings/embedder';
import { LocalBlobStore } from '../../providers/storage/blob-store';
import { LOG_LEVEL, recordingBox, recordSecret, testLogDestination, testLogger } from './secret-log';

export interface TestApp {
  app: FastifyInstance;
  services: Services;
  /** This app's widget reply sockets, listening on the test database like an API process. */
  chatHub: ChatHub;
  /** The app's service graph (its LISTEN connection, embedder, extraction pool). */
  composition: Composition;
  close(): Promise<void>;
}

/** One encryption key per test process: every service built here can open every secret. */
const testBox = new SecretBox(randomBytes(32));
/** One blob directory per test process. */
export const testBlobs = new LocalBlobStore(fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-blobs-')));
/** The real default embedding model (npm run models:fetch), loaded once per test process on first use. */
export const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
export const testEmbedder = lazyEmbedder(() => createEmbedder({ provider: 'local', modelsDir: MODELS_DIR }));

/** What a test replaces: service settings (fake model, provider URLs) and the shared pieces (box, blobs, embedder, extractor). */
export type TestOverrides = Partial<ServiceOptions> & { voice?: VoiceOverrides };

/** A test's configuration: the shipped defaults, with what the test sets. */
export function testConfig(values: Partial<Config> = {}): Config {
  return { ...configSchema.parse({}), ...values };
}

/**
 * A composition (app/compose.ts) as a test process builds one, on the test file's
 * database: a per-process encryption key; webhook deliveries may reach loopback (the
 * test receivers) and trust the test CA. The box records every secret it seals and the
 * services log into the run's log files, for the scan that proves no secret reaches a
 * log (secret-log.ts).
 */
export function testCompose(
  role: Role,
  db: { orm: Orm; databaseUrl: string },
  overrides: TestOverrides = {},
  extra: { config?: Partial<Config>; temporalAddress?: string; temporal?: ComposeOverrides['temporal']; connectWorker?: ComposeOptions['connectWorker'] } = {},
): Promise<Composition> {
  const { box, blobs, embedder, extract, log, denseIndex: _d, keyCache: _k, voice, ...services } = overrides;
  // Voice workers report a capacity no test reaches unless it sets one (a file's rows left live add up over its tests).
  return compose(testConfig({ VOICE_ICE_ALLOW_CIDRS: LOCAL_ICE_CIDRS, VOICE_WORKER_CAPACITY: 1000, ...extra.config }), {
    role,
    databaseUrl: db.databaseUrl,
    embedded: false,
    temporalAddress: extra.temporalAddress,
    connectWorker: extra.connectWorker,
    overrides: {
      orm: db.orm,
      log: log ?? testLogger(),
      box: recordingBox(box ?? testBox),
      blobs: blobs ?? testBlobs,
      embedder: embedder ?? testEmbedder,
      extract,
      temporal: extra.temporal,
      voice,
      services: {
        idempotencyTtlHours: 24,
        sender: { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 2_000, ca: createTestPki().ca },
        llm: null,
        msgapp: null,
        transcriber: null,
        // No extraction model unless the test gives one (never the local model models:fetch installed).
        structured: { ...DEFAULT_STRUCTURED, llm: null },
        ...services,
      },
    },
  });
}

/** Services alone (no app, no worker), for tests that write through them directly. */
export async function testServices(db: { orm: Orm; url: string }, overrides: TestOverrides = {}): Promise<Composition> {
  return testCompose('cli', { orm: db.orm, databaseUrl: db.url }, overrides);
}

/**
 * The app's logger in tests: the production options (redaction included) at info, into
 * this process's log file. TEST_LOG=debug shows the logs on stdout instead while
 * debugging a test (those are not scanned).
 */
function testAppLogger(): Parameters<typeof startApi>[1]['logger'] {
  if (process.env.TEST_LOG) return { ...loggerOptions(process.env.TEST_LOG) };
  const stream = testLogDestination();
  return stream ? { ...loggerOptions(LOG_LEVEL), stream } : false;
}

/** Records every API key these services issue (created or rotated), used in a request or not. */
function recordIssuedKeys(services: Services): void {
  const { apiKeys } = services;
  const create = apiKeys.create.bind(apiKeys);
  const rotate = apiKeys.rotate.bind(apiKeys);
  apiKeys.create = async (...args: Parameters<typeof create>) => {
    const created = await create(...args);
    recordSecret('api key', created.key);
    return created;
  };
  apiKeys.rotate = async (...args: Parameters<typeof rotate>) => {
    const rotated = await rotate(...args);
    recordSecret('api key', rotated.key);
    return rotated;
  };
}

/** Records what callers present as credentials (keys, user hashes): they must never reach a log. */
function recordPresentedSecrets(app: FastifyInstance, services: Services): void {
  // Every user_hash the site service is asked to verify, whatever carried it: multipart form
  // fields (upload, transcribe) are read by their handlers, after the hooks below have run.
  const { sites } = services;
  const verifies = sites.verifies.bind(sites);
  sites.verifies = (site, subject, hash) => {
    recordSecret('user_hash', hash);
    return verifies(site, subject, hash);
  };
  const userHash = (v: unknown) => (v && typeof v === 'object' ? (v as { user_hash?: unknown }).user_hash : undefined);
  app.addHook('onRequest', async (request) => {
    const auth = request.headers.authorization;
    if (typeof auth === 'string' && /^bearer /i.test(auth)) recordSecret('api key', auth.slice(7).trim());
    const q = userHash(request.query);
    if (typeof q === 'string') recordSecret('user_hash', q);
  });
  app.addHook('preValidation', async (request) => {
    const b = userHash((request.body as { user_context?: unknown } | undefined)?.user_context);
    if (typeof b === 'string') recordSecret('user_hash', b);
  });
}

/**
 * The real app on a real database, as one API process would build it: its own key
 * cache listening for key changes, its own rate limiters over the given store.
 */
export async function startTestApp(opts: {
  orm: Orm;
  databaseUrl: string;
  rateStore?: RateStore;
  perKey?: number;
  perWorkspace?: number;
  windowSeconds?: number;
  bodyLimitBytes?: number;
  maxUploadBytes?: number;
  temporal?: { client: Client; taskQueue: string; eagerStart?: boolean };
  msgappWebhook?: { appSecret: string | null; verifyToken: string | null };
  serviceOptions?: TestOverrides;
  /** The widget's limits (generous unless a test checks them). */
  widgetLimits?: WidgetLimits;
  /** Keep-alive ping interval of the reply sockets (30 s unless a test compresses it). */
  chatPingIntervalMs?: number;
  /** Reply sockets open at once per conversation and per client address (generous unless a test checks them). */
  chatSocketCaps?: SocketCaps;
  /**
   * Record bearer keys and user_hash values that requests present, for the log scan (default on). Off for
   * the fuzzer: what it presents is generated junk, which it also repeats in fields that are not secret.
   */
  recordPresented?: boolean;
  /** Further settings of this API process (e.g. STRUCTURED_WAIT_MS). */
  config?: Partial<Config>;
}): Promise<TestApp> {
  const widget = opts.widgetLimits ?? { perSiteClient: 10_000, sendsPerConversation: 1_000, refusalsPerAddress: 10_000 };
  const caps = opts.chatSocketCaps ?? { perConversation: 10_000, perAddress: 10_000 };
  const config: Partial<Config> = {
    RATE_LIMIT_PER_KEY: opts.perKey ?? 10_000,
    RATE_LIMIT_PER_WORKSPACE: opts.perWorkspace ?? 100_000,
    BODY_LIMIT_BYTES: opts.bodyLimitBytes ?? 1024 * 1024,
    ...(opts.maxUploadBytes ? { KB_UPLOAD_MAX_BYTES: opts.maxUploadBytes } : {}),
    WIDGET_RATE_LIMIT_PER_CLIENT: widget.perSiteClient,
    WIDGET_SENDS_PER_CONVERSATION: widget.sendsPerConversation,
    WIDGET_REFUSALS_PER_ADDRESS: widget.refusalsPerAddress ?? 10_000,
    // Files: generous unless a test checks the quotas.
    WIDGET_FILES_IN_FLIGHT_PER_ADDRESS: widget.work?.inFlightPerAddress ?? 10_000,
    WIDGET_FILES_IN_FLIGHT_PER_SITE: widget.work?.inFlightPerSite ?? 10_000,
    WIDGET_FILES_PER_ADDRESS_PER_HOUR: widget.work?.perAddressPerHour ?? 100_000,
    WIDGET_FILE_BYTES_PER_ADDRESS_PER_HOUR: widget.work?.bytesPerAddressPerHour ?? 1024 ** 4,
    WIDGET_FILE_BYTES_PER_SITE_PER_DAY: widget.work?.bytesPerSitePerDay ?? 1024 ** 4,
    CHAT_PING_INTERVAL_MS: opts.chatPingIntervalMs ?? 30_000,
    CHAT_MAX_SOCKETS_PER_CONVERSATION: caps.perConversation,
    CHAT_MAX_SOCKETS_PER_ADDRESS: caps.perAddress,
    // Dial-out caps: generous unless a test checks them (test/api/calls.test.ts).
    DIAL_OUT_CALLS_PER_VISITOR: 10_000,
    DIAL_OUT_CALLS_PER_ADDRESS: 10_000,
    DIAL_OUT_CALLS_PER_DESTINATION: 10_000,
    MSGAPP_APP_SECRET: opts.msgappWebhook?.appSecret ?? undefined,
    MSGAPP_VERIFY_TOKEN: opts.msgappWebhook?.verifyToken ?? undefined,
    ...opts.config,
  };
  const c = await testCompose('api', opts, opts.serviceOptions, { config, temporal: opts.temporal });
  try {
    recordIssuedKeys(c.services);
    const { app, chatHub } = await startApi(c, { rateStore: opts.rateStore ?? { kind: 'memory' }, windowSeconds: opts.windowSeconds, logger: testAppLogger() });
    recordSecret('msgapp app secret', opts.msgappWebhook?.appSecret);
    recordSecret('msgapp verify token', opts.msgappWebhook?.verifyToken);
    if (opts.recordPresented !== false) recordPresentedSecrets(app, c.services);
    await app.ready();
    return { app, services: c.services, chatHub, composition: c, close: () => c.close() };
  } catch (err) {
    await c.close();
    throw err;
  }
}

export { createWorkspace } from './db';

export async function createKey(services: Services, workspaceId: string, scopes: Scope[]): Promise<{ id: string; key: string }> {
  const created = await services.apiKeys.create(workspaceId, 'test key', scopes);
  recordSecret('api key', created.key);
  return { id: created.id, key: created.key };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** An agent created and published through the API (as a customer would), answering web chat from `origin`: its id. */
export async function publishedWebAgent(app: TestApp['app'], auth: Record<string, string>, origin: string, spec: Record<string, unknown> = {}): Promise<string> {
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Shop helper', instructions: 'Help shoppers.', triggers: { web_chat: { allowed_origins: [origin] } }, ...spec },
  });
  if (created.statusCode !== 201) throw new Error(`agent not created: ${created.body}`);
  const published = await app.inject({ method: 'POST', url: `/api/v1/agents/${created.json().id}/publish`, headers: auth });
  if (published.statusCode !== 200) throw new Error(`agent not published: ${published.body}`);
  return created.json().id as string;
}
