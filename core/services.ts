import type { EntityManager } from '@mikro-orm/postgresql';
import { AgentService } from './agents/agents';
import type { LlmSettings } from './llm/model';
import { ApiKeyService } from './auth/api-keys';
import { CredentialService } from './credentials';
import { ConversationService } from './conversations/conversations';
import { CustomerService } from './customers/customers';
import { MessageService } from './messages/messages';
import { ProviderEventService } from './messages/provider-events';
import { WidgetSessionService } from './widget/sessions';
import { ChatTranscript } from './chat/transcript';
import { AgentTurns } from './chat/turn';
import { TaskService } from './chat/tasks';
import { OpenAiCompatibleModel } from './llm/model';
import pino, { type Logger } from 'pino';
import { SiteService } from './widget/sites';
import { UploadService } from './widget/uploads';
import { createExtractor, extractorFromConfig, transcriberFromConfig } from './kb/extractor';
import { DEFAULT_MAX_MEMORY_MB, DEFAULT_TIMEOUT_MS, type Transcriber } from './kb/extract';
import type { ExtractFn } from './kb/indexing';
import { CloudApiProvider, type MsgappProvider } from './msgapp/provider';
import type { KeyCache } from './auth/key-cache';
import { configSchema, modelsDir, publicBaseUrl, type Config } from './config';
import type { SecretBox } from './crypto/secret-box';
import { IdempotencyStore } from './idempotency/store';
import { DenseIndex } from './kb/dense-index';
import { createEmbedder, type Embedder } from './kb/embedder';
import { FileService } from './kb/files';
import { FolderService } from './kb/folders';
import { SearchService } from './kb/search';
import type { BlobStore } from './storage/blob-store';
import { blobStoreFromConfig } from './storage/from-config';
import { policyFromCidrs } from './net/ssrf';
import { DeliveryService } from './webhooks/deliveries';
import type { SenderSettings } from './webhooks/sender';
import { SubscriptionService } from './webhooks/subscriptions';

/** The domain services shared by the API and the activities; no Fastify, no Temporal inside. */
export interface Services {
  apiKeys: ApiKeyService;
  folders: FolderService;
  idempotency: IdempotencyStore;
  subscriptions: SubscriptionService;
  deliveries: DeliveryService;
  files: FileService;
  search: SearchService;
  blobs: BlobStore;
  agents: AgentService;
  customers: CustomerService;
  conversations: ConversationService;
  messages: MessageService;
  credentials: CredentialService;
  providerEvents: ProviderEventService;
  sites: SiteService;
  widget: WidgetSessionService;
  /** Widget visitors' uploads: storage, extraction, signed links, search over long ones. */
  uploads: UploadService;
  /** Web conversations' messages. */
  transcript: ChatTranscript;
  /** Agent turns: the conversation actor's activities run them. */
  turns: AgentTurns;
  tasks: TaskService;
  box: SecretBox;
  llm: LlmSettings | null;
}

export interface ServiceOptions {
  keyCache?: KeyCache;
  idempotencyTtlHours: number;
  box: SecretBox;
  sender: SenderSettings;
  blobs: BlobStore;
  /** Loaded on first use: a process that never searches never loads the model. */
  embedder: () => Promise<Embedder>;
  /** The dense index of this process; without one (CLI, tests that do not search) nothing is cached. */
  denseIndex?: DenseIndex;
  llm?: LlmSettings | null;
  /** The msgapp provider; null when none is configured (sends then fail with a clear reason). */
  msgapp?: MsgappProvider | null;
  /** Speech-to-text for widget voice notes and audio/video uploads; null/absent: none. */
  transcriber?: Transcriber | null;
  /** Text extraction of widget uploads; absent: the isolated extractor with default limits and `transcriber`. */
  extract?: ExtractFn;
  /** Widget uploads whose text is longer than this are also indexed for search. */
  uploadIndexChars?: number;
  /** PUBLIC_BASE_URL: the origin of every link handed out (media links). Absent: the default HOST and PORT's address. */
  publicBaseUrl?: string;
  /** Where the services log; absent: pino on stdout at LOG_LEVEL. */
  log?: Logger;
}

export function createServices(em: EntityManager, opts: ServiceOptions): Services {
  const baseUrl = opts.publicBaseUrl ?? publicBaseUrl(configSchema.parse({}));
  const customers = new CustomerService(em);
  const sites = new SiteService(em, opts.box);
  const transcriber = opts.transcriber ?? null;
  const search = new SearchService(em, opts.embedder, opts.denseIndex ?? new DenseIndex(em, null, console));
  const transcript = new ChatTranscript(em);
  const credentials = new CredentialService(em, opts.box);
  const uploads = new UploadService({
    em,
    blobs: opts.blobs,
    box: opts.box,
    transcriber,
    extract: opts.extract ?? createExtractor({ timeoutMs: DEFAULT_TIMEOUT_MS, maxMemoryMb: DEFAULT_MAX_MEMORY_MB, transcriber }),
    embedder: opts.embedder,
    indexChars: opts.uploadIndexChars,
    publicBaseUrl: baseUrl,
  });
  return {
    sites,
    widget: new WidgetSessionService(em, sites, customers, { transcriber: transcriber !== null }),
    uploads,
    apiKeys: new ApiKeyService(em, opts.keyCache),
    folders: new FolderService(em),
    idempotency: new IdempotencyStore(em, opts.idempotencyTtlHours, opts.box),
    subscriptions: new SubscriptionService(em, opts.box, opts.sender),
    deliveries: new DeliveryService(em, opts.box, opts.sender),
    files: new FileService(em, opts.blobs),
    blobs: opts.blobs,
    agents: new AgentService(em, { provider: opts.msgapp ?? null, credentials }),
    customers,
    conversations: new ConversationService(em),
    messages: new MessageService(em, opts.box, opts.msgapp ?? null),
    credentials,
    providerEvents: new ProviderEventService(em, opts.box, opts.blobs, opts.msgapp ?? null, baseUrl),
    box: opts.box,
    llm: opts.llm ?? null,
    search,
    transcript,
    tasks: new TaskService(em),
    turns: new AgentTurns(em, transcript, search, uploads, opts.llm ? new OpenAiCompatibleModel(opts.llm) : null, opts.log ?? pino({ level: 'info' })),
  };
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

/** `box` comes from openSecretBox (core/crypto/encryption-key.ts), which checks the key against the database. */
export function serviceOptionsFromConfig(config: Config, opts: { box: SecretBox; keyCache?: KeyCache; denseIndex?: DenseIndex }): ServiceOptions {
  return {
    keyCache: opts.keyCache,
    idempotencyTtlHours: config.IDEMPOTENCY_TTL_HOURS,
    box: opts.box,
    sender: { policy: policyFromCidrs(config.CONCIERGE_WEBHOOK_ALLOW_CIDRS), timeoutMs: config.CONCIERGE_WEBHOOK_TIMEOUT_MS },
    blobs: blobStoreFromConfig(config),
    embedder: embedderFromConfig(config),
    denseIndex: opts.denseIndex,
    llm: config.LLM_BASE_URL ? { baseUrl: config.LLM_BASE_URL, apiKey: config.LLM_API_KEY, model: config.LLM_MODEL } : null,
    msgapp: config.MSGAPP_API_BASE ? new CloudApiProvider({ baseUrl: config.MSGAPP_API_BASE, timeoutMs: 15_000 }) : null,
    transcriber: transcriberFromConfig(config),
    extract: extractorFromConfig(config),
    uploadIndexChars: config.WIDGET_UPLOAD_INDEX_CHARS,
    publicBaseUrl: publicBaseUrl(config),
    log: pino({ level: config.LOG_LEVEL }),
  };
}
