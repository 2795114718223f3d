import { SmtpMailer } from '../providers/mail/smtp';
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { EntityManager } from '@mikro-orm/postgresql';
import pino, { type Logger } from 'pino';
import { KeyCache } from '../domain/keys/key-cache';
import { modelsDir, publicBaseUrl, type Config } from './config';
import { openSecretBox } from './encryption-key';
import { serviceCodec, temporalDataConverter, type EncryptionCodec } from '../lib/crypto/payload-codec';
import type { SecretBox } from '../lib/crypto/secret-box';
import { PgNotifications } from '../db/notifications';
import { reportVoiceCapacity, voiceFromConfig, type VoiceOverrides, type VoiceParts } from './voice';
import { openDatabase, type Orm } from '../db/orm';
import { DenseIndex } from '../domain/kb/dense-index';
import { createEmbedder, type Embedder } from '../providers/embeddings/embedder';
import { extractorFromConfig, poolFromConfig, transcriberFromConfig, widgetMediaMaxSeconds } from './extractor';
import { OpenAiImageDescriber } from '../providers/llm/vision';
import type { StructuredSettings } from '../domain/extraction/extractions';
import { llamaServerPath, localLlmPath, LocalLlmServer, localServerFilesPresent } from '../providers/llm/local-server';
import { IndexingService, type ExtractFn } from '../domain/kb/indexing';
import { CloudApiProvider } from '../providers/msgapp/cloud-api';
import { policyFromCidrs } from '../lib/net/ssrf';
import { createServices, type ServiceOptions, type Services } from './services';
import { createWorkflowClients, type WorkflowClients } from './temporal-clients';
import type { BlobStore } from '../providers/storage/blob-store';
import { blobStoreFromConfig } from './storage';
import { serveMetrics, setBacklogSource } from './metrics';
import { BacklogReader } from './metrics-backlog';

/**
 * What a process is: `api` serves HTTP (key cache, chat sockets), `worker` runs workflows
 * and activities (outbox relay, schedules), `both` is `npm start`'s main process, `relay`
 * the outbox relay alone (worker/relay-main.ts: `npm start`'s second process), `cli` the
 * admin commands (no notifications, no Temporal).
 */
export type Role = 'api' | 'worker' | 'both' | 'relay' | 'cli';

/** What tests and benchmarks replace; anything given here is the caller's, and `close()` leaves it open. */
export interface ComposeOverrides {
  /** An ORM the caller owns (a test file's database). */
  orm?: Orm;
  log?: Logger;
  box?: SecretBox;
  blobs?: BlobStore;
  embedder?: () => Promise<Embedder>;
  extract?: ExtractFn;
  /**
   * A Temporal client the caller owns (tests: the run's server, a task queue of the file's
   * own); `eagerStart` only when it is built on the native connection of a worker polling
   * that task queue in this process.
   */
  temporal?: { client: Client; taskQueue: string; eagerStart?: boolean };
  /** Service settings (fake model, provider URLs, webhook sender policy, ...). */
  services?: Partial<Omit<ServiceOptions, 'box' | 'blobs' | 'embedder' | 'extract' | 'denseIndex' | 'keyCache' | 'log' | 'workflows' | 'telephonyKind'>>;
  /** Voice pieces (a synthesizer, a recognizer, telephony) in place of the settings'. */
  voice?: VoiceOverrides;
}

export interface ComposeOptions {
  role: Role;
  databaseUrl: string;
  /** `npm start` and the admin CLI: the encryption key may live in (or be generated into) the data directory. */
  embedded: boolean;
  /** The Temporal frontend; absent: no client (API endpoints that start workflows answer 503). */
  temporalAddress?: string;
  /**
   * Worker roles (worker/main.ts, `npm start`: worker/connection.ts `connectWorker`): the
   * worker's native connection, built here so the process's client shares it. Absent:
   * the client gets a plain gRPC connection and the worker connects on its own.
   */
  connectWorker?: (address: string, logLevel: string) => Promise<NativeConnection>;
  /** False: another process serves this one's metrics (app/metrics.ts setPeerMetrics), so no database gauges or listener here. */
  servesMetrics?: boolean;
  overrides?: ComposeOverrides;
}

/** One process's service graph: built once, shared by the API, the worker and the CLI, closed once. */
export interface Composition {
  config: Config;
  role: Role;
  databaseUrl: string;
  log: Logger;
  orm: Orm;
  em: EntityManager;
  /** The process's one LISTEN connection (null for the CLI). */
  notifications: PgNotifications | null;
  box: SecretBox;
  blobs: BlobStore;
  /** Loaded on first use: a process that never embeds never loads the model. */
  embedder: () => Promise<Embedder>;
  /** The process's extraction pool: indexing and widget uploads share its cap (EXTRACT_CONCURRENCY). */
  extract: ExtractFn;
  denseIndex: DenseIndex;
  /** API roles: the key look-up cache, cleared by key-change notices. */
  keyCache: KeyCache | null;
  services: Services;
  /** Voice: speech both ways, the transport, the telephony, and what is missing for them. */
  voice: VoiceParts;
  indexing: IndexingService;
  /** Encrypts every Temporal payload this process writes (clients, the worker, the UI's codec endpoint). */
  payloadCodec: EncryptionCodec;
  temporal: {
    client: Client;
    taskQueue: string;
    namespace: string;
    /** Worker roles: the native connection the client is built on, for the process's worker to poll over (else null). */
    native: NativeConnection | null;
    /**
     * Whether starts a caller waits for may ask for eager start (`requestEagerStart`):
     * only in `both`, where the client and this process's worker share the native
     * connection and the task queue. (An API-only client must not ask: the SDK refuses
     * it on a plain gRPC connection.)
     */
    eagerStart: boolean;
  } | null;
  /**
   * The Temporal client wrappers (app/temporal-clients/), built once on `temporal`'s client
   * for the API, the domain services and the worker alike (null without a client).
   */
  workflows: WorkflowClients | null;
  /** The Temporal frontend's address, for the worker's own connection (null: none given). */
  temporalAddress: string | null;
  /**
   * Adds a step to `close()`; steps run last-added first (what was started last stops first). `name` is what the log
   * says when the step is slow (over SLOW_CLOSE_MS) or fails.
   */
  onClose(step: () => Promise<void> | void, name?: string): void;
  /** Stops everything this composition and its users registered, in reverse order. Idempotent. */
  close(): Promise<void>;
}

/** Builds the embedder once, on first use. */
export function lazyEmbedder(make: () => Embedder): () => Promise<Embedder> {
  let made: Embedder | null = null;
  return async () => (made ??= make());
}

export function embedderFromConfig(config: Config): () => Promise<Embedder> {
  return lazyEmbedder(() =>
    createEmbedder({
      provider: config.EMBEDDINGS_PROVIDER,
      modelsDir: modelsDir(config),
      model: config.EMBEDDINGS_MODEL,
      baseUrl: config.EMBEDDINGS_BASE_URL,
      apiKey: config.EMBEDDINGS_API_KEY,
      threads: config.CONCIERGE_EMBED_THREADS,
      allowRemote: config.CONCIERGE_MODELS_ALLOW_REMOTE,
      remoteHost: config.HF_ENDPOINT,
    }),
  );
}

/** The embedded local model's files (npm run models:fetch), when STRUCTURED_LOCAL allows it and they are there. */
export function localModelFiles(config: Config): { binary: string; model: string; modelName: string } | null {
  if (config.STRUCTURED_LOCAL === 'off') return null;
  const dir = modelsDir(config);
  const binary = llamaServerPath(dir);
  const model = localLlmPath(dir, config.STRUCTURED_LOCAL_MODEL);
  return localServerFilesPresent(binary, model) ? { binary, model, modelName: config.STRUCTURED_LOCAL_MODEL } : null;
}

/**
 * Structured extraction's model: STRUCTURED_BASE_URL; else the embedded local model when
 * its files are there (started on demand by the process that calls it: the worker); else
 * the agents' LLM_BASE_URL (its key and model unless STRUCTURED_MODEL names another);
 * else none. `log` is where the local server reports.
 */
export function structuredFromConfig(config: Config, log?: Logger): StructuredSettings {
  const limits = { chunkChars: config.STRUCTURED_CHUNK_CHARS, maxChunks: config.STRUCTURED_MAX_CHUNKS, validationTimeoutMs: config.STRUCTURED_VALIDATION_TIMEOUT_MS };
  const timeoutMs = config.STRUCTURED_TIMEOUT_MS;
  if (config.STRUCTURED_BASE_URL) {
    return { ...limits, llm: { baseUrl: config.STRUCTURED_BASE_URL, apiKey: config.STRUCTURED_API_KEY, model: config.STRUCTURED_MODEL ?? 'default', timeoutMs } };
  }
  const files = localModelFiles(config);
  if (files) {
    const local = new LocalLlmServer({ ...files, threads: config.STRUCTURED_LOCAL_THREADS, contextTokens: config.STRUCTURED_LOCAL_CONTEXT, idleMs: config.STRUCTURED_LOCAL_IDLE_MS, log });
    return { ...limits, llm: null, local, localTimeoutMs: timeoutMs };
  }
  if (config.LLM_BASE_URL) return { ...limits, llm: { baseUrl: config.LLM_BASE_URL, apiKey: config.LLM_API_KEY, model: config.STRUCTURED_MODEL ?? config.LLM_MODEL, timeoutMs } };
  return { ...limits, llm: null };
}

/**
 * The composition root: every process (api/main, worker/main, `npm start`, the admin CLI,
 * the tests and the benchmarks) builds its services here, once: one ORM, one LISTEN
 * connection shared by its subscribers, one logger, one Temporal client, one embedder,
 * one extraction pool. The API and the worker add their own parts (api/server.ts,
 * worker/runtime.ts) and register them with `onClose`.
 */
/** A close step slower than this is logged with its name (warn). */
export const SLOW_CLOSE_MS = 5_000;

export async function compose(config: Config, opts: ComposeOptions): Promise<Composition> {
  const o = opts.overrides ?? {};
  const steps: Array<{ run: () => Promise<void> | void; name: string }> = [];
  const onClose = (run: () => Promise<void> | void, name = 'unnamed step') => void steps.push({ run, name });
  let closing: Promise<void> | null = null;
  let closeLog: { warn(obj: object, msg: string): void } | null = null;
  const close = () =>
    (closing ??= (async () => {
      let first: unknown = null;
      for (const step of steps.reverse()) {
        const started = Date.now();
        try {
          await step.run();
        } catch (err) {
          first ??= err;
        }
        const ms = Date.now() - started;
        // A shutdown that drags names its part (a deploy waiting on it, a test's teardown).
        if (ms > SLOW_CLOSE_MS) closeLog?.warn({ step: step.name, ms }, `shutdown: ${step.name} took ${ms} ms`);
      }
      if (first) throw first;
    })());

  try {
    const log = o.log ?? pino({ level: config.LOG_LEVEL });
    closeLog = log;
    const orm = o.orm ?? (await openDatabase(opts.databaseUrl));
    if (!o.orm) onClose(() => orm.close(), 'database pool');
    // The key first: without it (or with one that does not open the stored secrets) nothing else starts.
    const box = o.box ?? (await openSecretBox(config, orm.em, { embedded: opts.embedded }));

    const notifications = opts.role === 'cli' ? null : new PgNotifications(opts.databaseUrl, log);
    if (notifications) {
      await notifications.start();
      onClose(() => notifications.stop(), 'LISTEN connection');
    }
    const keyCache = notifications && (opts.role === 'api' || opts.role === 'both') ? new KeyCache(notifications) : null;
    if (keyCache) await keyCache.start();
    const denseIndex = new DenseIndex(orm.em, notifications);
    await denseIndex.start();

    const blobs = o.blobs ?? blobStoreFromConfig(config);
    if (!o.blobs) onClose(() => (blobs as { close?: () => void }).close?.(), 'blob store');
    const embedder = o.embedder ?? embedderFromConfig(config);
    const s = o.services ?? {};
    const transcriber = 'transcriber' in s ? (s.transcriber ?? null) : transcriberFromConfig(config);
    const workPool = poolFromConfig(config);
    const extract = o.extract ?? extractorFromConfig(config, transcriber, workPool);
    const structured = 'structured' in s ? s.structured : structuredFromConfig(config, log);
    // The local model server (if this process ever started it) stops with the process.
    const localServer = structured?.local;
    if (localServer instanceof LocalLlmServer) onClose(() => localServer.stop(), 'local model server');
    const baseUrl = s.publicBaseUrl ?? publicBaseUrl(config);
    // The voice parts need the session service, which the services hold: the prerequisites are decided first from the settings.
    let voice: VoiceParts | null = null;
    // The Temporal client wrappers need the transcript service, so they are built after the services, which read them when used.
    let workflows: WorkflowClients | null = null;
    const voiceDeps = { box, notifications, transcriber, publicBaseUrl: baseUrl };
    const services = createServices(orm.em, {
      idempotencyTtlHours: s.idempotencyTtlHours ?? config.IDEMPOTENCY_TTL_HOURS,
      sender: s.sender ?? { policy: policyFromCidrs(config.CONCIERGE_WEBHOOK_ALLOW_CIDRS), timeoutMs: config.CONCIERGE_WEBHOOK_TIMEOUT_MS },
      llm: 'llm' in s ? s.llm : config.LLM_BASE_URL ? { baseUrl: config.LLM_BASE_URL, apiKey: config.LLM_API_KEY, model: config.LLM_MODEL } : null,
      msgapp: 'msgapp' in s ? s.msgapp : config.MSGAPP_API_BASE ? new CloudApiProvider({ baseUrl: config.MSGAPP_API_BASE, timeoutMs: config.MSGAPP_TIMEOUT_MS }) : null,
      transcriber,
      vision: 'vision' in s ? (s.vision ?? null) : visionFromConfig(config),
      prices: {
        currency: config.BILLING_CURRENCY,
        msgapp_message: config.BILLING_PRICE_MSGAPP_MESSAGE,
        structured_extraction_page: config.BILLING_PRICE_EXTRACTION_PAGE,
        llm_1k_tokens: config.BILLING_PRICE_LLM_1K_TOKENS,
        voice_minute_credits: config.BILLING_CREDITS_PER_VOICE_MINUTE,
        call_minute_credits: { fixed: config.BILLING_CREDITS_PER_CALL_MINUTE_FIXED, mobile: config.BILLING_CREDITS_PER_CALL_MINUTE_MOBILE, other: config.BILLING_CREDITS_PER_CALL_MINUTE_OTHER },
      },
      structured,
      models: s.models ?? { allowed: config.LLM_ALLOWED_MODELS, maxTokensCap: config.LLM_MAX_TOKENS_CAP, prices: config.LLM_MODEL_PRICES },
      uploadIndexChars: s.uploadIndexChars ?? config.WIDGET_UPLOAD_INDEX_CHARS,
      widgetMediaMaxSeconds: s.widgetMediaMaxSeconds ?? widgetMediaMaxSeconds(config),
      workPool,
      publicBaseUrl: baseUrl,
      temporalUi: () => ({ origin: config.TEMPORAL_UI_ORIGIN[0] ?? null, namespace: config.TEMPORAL_NAMESPACE }),
      voiceMaxConcurrent: config.VOICE_MAX_CONCURRENT,
      voiceCaps: {
        perVisitor: config.VOICE_MAX_SESSIONS_PER_VISITOR,
        perAddress: config.VOICE_MAX_SESSIONS_PER_ADDRESS,
        reservedForApi: config.VOICE_SLOTS_RESERVED_FOR_API,
        joinWindowMs: config.VOICE_JOIN_TIMEOUT_SECONDS * 1000,
      },
      get voicePrereqs() {
        return voice?.prereqs;
      },
      get telephonyKind() {
        return voice?.telephony?.kind ?? null;
      },
      get voiceTransport() {
        return voice?.transport ?? null;
      },
      get workflows() {
        return workflows;
      },
      box,
      blobs,
      embedder,
      extract,
      denseIndex,
      keyCache: keyCache ?? undefined,
      log,
      sessions: s.sessions ?? { idleMs: config.CONSOLE_SESSION_IDLE_MINUTES * 60_000, absoluteMs: config.CONSOLE_SESSION_ABSOLUTE_HOURS * 3_600_000 },
      mailer: 'mailer' in s ? s.mailer : mailerFromConfig(config, onClose),
    });
    voice = voiceFromConfig(config, { ...voiceDeps, sessions: services.voice, trunks: services.credentials, servers: services.credentials }, o.voice);
    // A worker with speech both ways runs voice (worker/runtime.ts voiceMediaOf): it reports what it carries.
    if ((opts.role === 'worker' || opts.role === 'both') && voice.stt && voice.tts) await reportVoiceCapacity(services.voice, config.VOICE_WORKER_CAPACITY, onClose, log);
    // Schema validation threads (started by the worker's extraction steps) stop with the process.
    onClose(() => services.structured.close(), 'schema validation threads');
    const indexing = new IndexingService({ em: orm.em, kb: services.repos.kb, blobs, extract, embedder });
    // A relay beside `npm start`'s main process reports through it (worker/relay-main.ts): no database gauges of its own, no listener.
    if (opts.role !== 'cli' && opts.servesMetrics !== false) {
      // Metrics (app/metrics.ts): the database gauges read at scrape time, and METRICS_PORT's listener when set.
      const backlog = new BacklogReader(orm.em, { webhooks: services.repos.webhooks, kb: services.repos.kb, voice: services.voice });
      onClose(setBacklogSource(() => backlog.read(), (err) => log.warn({ err }, 'metrics: backlog gauges not read')), 'metrics backlog gauges');
      if (config.METRICS_PORT !== undefined) onClose((await serveMetrics(config.METRICS_HOST, config.METRICS_PORT, config.METRICS_TOKEN ?? null)).close, 'metrics listener');
    }

    // Every client and worker of the process encrypts what it hands Temporal (lib/crypto/payload-codec.ts).
    const payloadCodec = serviceCodec(box, config.TEMPORAL_PAYLOAD_KEY_VERSION);
    const dataConverter = temporalDataConverter(payloadCodec);
    let temporal: Composition['temporal'] = null;
    if (o.temporal) {
      // The caller's connection, with this composition's data converter: a test's client encrypts as the service does.
      const given = o.temporal.client;
      const client = new Client({ connection: given.connection, namespace: given.options.namespace, dataConverter });
      temporal = { client, taskQueue: o.temporal.taskQueue, namespace: given.options.namespace, native: null, eagerStart: o.temporal.eagerStart ?? false };
    } else if (opts.temporalAddress && opts.connectWorker && (opts.role === 'worker' || opts.role === 'both')) {
      // One native connection for the worker (worker/runtime.ts) and the client, so a start this
      // process asks to be eager is handed to its own worker (an API process never loads the native bridge).
      const native = await opts.connectWorker(opts.temporalAddress, config.LOG_LEVEL);
      onClose(() => native.close(), 'Temporal native connection');
      temporal = {
        client: new Client({ connection: native, namespace: config.TEMPORAL_NAMESPACE, dataConverter }),
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        namespace: config.TEMPORAL_NAMESPACE,
        native,
        eagerStart: opts.role === 'both',
      };
    } else if (opts.temporalAddress && opts.role !== 'cli') {
      const connection = await Connection.connect({ address: opts.temporalAddress });
      onClose(() => connection.close(), 'Temporal connection');
      temporal = {
        client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter }),
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        namespace: config.TEMPORAL_NAMESPACE,
        native: null,
        eagerStart: false,
      };
    }

    if (temporal) {
      workflows = createWorkflowClients(temporal.client, temporal.taskQueue, {
        transcript: services.transcript,
        // Eager where a worker of this process polls over the client's native connection: `both`, and the worker's own starts.
        eagerStart: temporal.eagerStart || temporal.native !== null,
        extractWaitMs: config.STRUCTURED_WAIT_MS,
      });
    }

    return {
      config,
      role: opts.role,
      databaseUrl: opts.databaseUrl,
      log,
      orm,
      em: orm.em,
      notifications,
      box,
      blobs,
      embedder,
      extract,
      denseIndex,
      keyCache,
      services,
      voice,
      indexing,
      payloadCodec,
      temporal,
      workflows,
      temporalAddress: opts.temporalAddress ?? null,
      onClose,
      close,
    };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

/** The vision model (VISION_MODEL at VISION_BASE_URL, or the language model's server); null when unset. */
function visionFromConfig(config: Config): OpenAiImageDescriber | null {
  const baseUrl = config.VISION_BASE_URL ?? config.LLM_BASE_URL;
  if (!config.VISION_MODEL || !baseUrl) return null;
  return new OpenAiImageDescriber({ baseUrl, apiKey: config.VISION_BASE_URL ? config.VISION_API_KEY : (config.VISION_API_KEY ?? config.LLM_API_KEY), model: config.VISION_MODEL });
}

/** The console's mail (invitations, password resets) over SMTP_URL; null when it is unset. */
function mailerFromConfig(config: Config, onClose: (step: () => void, name: string) => void): SmtpMailer | null {
  if (!config.SMTP_URL) return null;
  const mailer = new SmtpMailer(config.SMTP_URL, config.SMTP_FROM);
  onClose(() => mailer.close(), 'SMTP transport');
  return mailer;
}
