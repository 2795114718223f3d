import type { CarrierWebhooks } from '../domain/ports/msgapp';
import { cloudApiWebhooks } from '../providers/msgapp/webhook';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AgentService } from '../domain/agents/agents';
import type { LlmSettings } from '../providers/llm/model';
import { ApiKeyService } from '../domain/keys/api-keys';
import { AuditLog } from '../domain/audit/audit-log';
import { PeopleService } from '../domain/people/users';
import { DEFAULT_SESSION_SETTINGS, SessionService, type SessionSettings } from '../domain/people/sessions';
import { LinkService } from '../domain/people/links';
import { SsoService } from '../domain/people/sso';
import { TotpService } from '../domain/people/totp';
import type { Mailer } from '../domain/ports/mailer';
import { CredentialService } from '../domain/credentials/credentials';
import { ConversationService } from '../domain/conversations/conversations';
import { AgentTrials } from '../domain/chat/agent-try';
import { CustomerService } from '../domain/customers/customers';
import { MessageService } from '../domain/messaging/messages';
import { ProviderEventService } from '../domain/messaging/provider-events';
import { ProviderWebhook } from '../domain/messaging/provider-webhook';
import { WidgetSessionService } from '../domain/widget/sessions';
import { ChatTranscript } from '../domain/chat/transcript';
import { AnalyticsService } from '../domain/analytics/analytics';
import { CreditService, type Prices } from '../domain/billing/credits';
import { ModelPolicy, type ModelPolicyOptions } from '../domain/agents/model-policy';
import { McpService } from '../domain/mcp/servers';
import { AgentTurns, ChatFramePublisher } from '../domain/chat/turn';
import { TaskService } from '../domain/chat/tasks';
import { listOpenAiModels, OpenAiCompatibleModel } from '../providers/llm/model';
import type { ModelFactory } from '../domain/ports/llm';

/** The language model the domain opens: any OpenAI-compatible server. */
const openAiCompatible: ModelFactory = (settings) => new OpenAiCompatibleModel(settings);
import type { Logger } from 'pino';
import { SiteService } from '../domain/widget/sites';
import { agentUploads, createUploadServices, type UploadSearchService, type UploadService, type VoiceNoteService } from '../domain/widget/uploads';
import { WidgetFiles } from '../domain/widget/uploads/widget-files';
import { WidgetChat } from '../domain/widget/chat';
import { DialOut } from '../domain/voice/dial-out';
import { WidgetVoice } from '../domain/widget/voice';
import { DocumentExtractions } from '../domain/extraction/documents';
import { WebhookRetryRuns } from '../domain/webhooks/retry-runs';
import type { VoiceTransport } from '../domain/ports/voice';
import { OutboundMessages } from '../domain/messaging/outbound';
import type { WorkflowRuns } from '../domain/ports/workflow-runs';
import { FeedbackService } from '../domain/widget/feedback';
import { DEFAULT_STRUCTURED, StructuredExtractionService, type StructuredSettings } from '../domain/extraction/extractions';
import type { Transcriber } from '../lib/extract';
import type { ImageDescriber } from '../providers/llm/vision';
import type { FairPool } from '../lib/fair-pool';
import type { ExtractFn } from '../domain/kb/indexing';
import type { MsgappProvider } from '../providers/msgapp/cloud-api';
import type { KeyCache } from '../domain/keys/key-cache';
import { configSchema, publicBaseUrl } from './config';
import type { SecretBox } from '../lib/crypto/secret-box';
import { IdempotencyStore } from '../domain/idempotency/store';
import type { DenseIndex } from '../domain/kb/dense-index';
import type { Embedder } from '../providers/embeddings/embedder';
import { FileService } from '../domain/kb/files';
import { FolderService } from '../domain/kb/folders';
import { SearchService } from '../domain/kb/search';
import type { BlobStore } from '../providers/storage/blob-store';
import { DeliveryService } from '../domain/webhooks/deliveries';
import type { SenderSettings } from '../domain/webhooks/sender';
import { SubscriptionService } from '../domain/webhooks/subscriptions';
import { SupportService } from '../domain/support/tickets';
import { TeamService } from '../domain/team/team';
import { VoiceSessionService } from '../domain/voice/sessions';
import { CallService } from '../domain/voice/calls';
import type { VoicePrereqs } from './voice';
import { createRepositories, type Repositories } from '../domain/repositories';
import { SendPlanner } from '../domain/messaging/plan';
import { InboxService } from '../domain/inbox/inbox';
import { InboxStore } from '../domain/inbox/store';
import { ConversationInbox } from '../domain/conversations/inbox';
import { ConversationDebugger } from '../domain/debugger/conversation-debugger';

/** The domain services shared by the API and the activities; no Fastify, no Temporal inside. Built by app/compose.ts. */
export interface Services {
  apiKeys: ApiKeyService;
  /** The console's people: users, roles, sign-in, one-time links. */
  people: PeopleService;
  /** The console's server-side sessions. */
  sessions: SessionService;
  /** The audit log (append-only). */
  audit: AuditLog;
  /** OpenID Connect sign-in per workspace: its settings and the flow. */
  sso: SsoService;
  /** The console's optional second factor (TOTP) and the workspace's rule requiring it. */
  totp: TotpService;
  /** PUBLIC_BASE_URL, or the default HOST and PORT's address: the origin the console is served from and links point to. */
  publicBaseUrl: string;
  folders: FolderService;
  idempotency: IdempotencyStore;
  subscriptions: SubscriptionService;
  deliveries: DeliveryService;
  files: FileService;
  search: SearchService;
  blobs: BlobStore;
  agents: AgentService;
  /** The console's "Try it": a real turn in a test conversation that nothing counts, tools that act outside stubbed. */
  agentTrials: AgentTrials;
  customers: CustomerService;
  conversations: ConversationService;
  analytics: AnalyticsService;
  credits: CreditService;
  mcp: McpService;
  messages: MessageService;
  credentials: CredentialService;
  /** Support tickets from workspaces to the platform operator. */
  support: SupportService;
  /** The team's availability (business hours, away): what the widget tells a visitor a person holds. */
  team: TeamService;
  providerEvents: ProviderEventService;
  /** POST /webhooks/msgapp's events, once signed and parsed: statuses applied, inbound messages stored. */
  providerWebhook: ProviderWebhook;
  /** The carrier's webhook: signature and payload (the Cloud API's). */
  msgappWebhooks: CarrierWebhooks;
  sites: SiteService;
  widget: WidgetSessionService;
  /** Widget visitors' uploads: records and their state (storage, extraction, attaching to a message). */
  uploads: UploadService;
  /** Widget visitors' voice notes: held, transcribed in the worker, released. */
  voiceNotes: VoiceNoteService;
  /** Search over widget visitors' long uploads, and the signed links of uploads and knowledge-base files. */
  uploadSearch: UploadSearchService;
  /** The widget's file endpoints end to end: uploads, their status and links, voice notes. */
  widgetFiles: WidgetFiles;
  /** The visitor's side of the conversation actor: send, history, a new conversation, cancelling a task. */
  widgetChat: WidgetChat;
  /** Places checked dial-out calls (the widget's and the API's; POST /api/v1/outbound channel voice end to end). */
  dialOut: DialOut;
  /** The widget's voice endpoints end to end: a session started, a text turn, stopped; a dial-out to the visitor's phone. */
  widgetVoice: WidgetVoice;
  /** POST /documents/extract_structured end to end: recorded, run by its workflow, answered. */
  documents: DocumentExtractions;
  /** Deliveries' retry runs as the API drives them: retry now, cancelled with their subscription. */
  webhookRetryRuns: WebhookRetryRuns;
  /** POST /api/v1/messages: planned, sent by its workflow, answered. */
  outbound: OutboundMessages;
  /** Web conversations' messages. */
  transcript: ChatTranscript;
  /** Visitors' thumbs on replies and ratings of conversations (widget), read back by analytics. */
  feedback: FeedbackService;
  /** Agent turns: the conversation actor's activities run them. */
  turns: AgentTurns;
  /** The console's conversation debugger: turns as the conversation's workflow history recorded them. */
  conversationDebugger: ConversationDebugger;
  tasks: TaskService;
  /** Structured extraction (POST /documents/extract_structured) and its workflow's steps. */
  structured: StructuredExtractionService;
  /** Voice sessions, calls and their recordings (rows, limits, minutes paid). */
  voice: VoiceSessionService;
  /** Dial-out checks, calls and recordings with signed links, as the API shows them. */
  calls: CallService;
  /** The console's inbox: conversations across channels, people's actions through the actor, the queue. */
  inbox: InboxService;
  /** The aggregates' repositories, for what the composition root wires outside the services (indexing). */
  repos: Repositories;
  box: SecretBox;
  llm: LlmSettings | null;
  /** Opens a language model at an endpoint (an OpenAI-compatible server). */
  openModel: ModelFactory;
  /** What agents may run on the installation's model key (the OpenAPI document states it too). */
  models: ModelPolicy;
}

export interface ServiceOptions {
  keyCache?: KeyCache;
  idempotencyTtlHours: number;
  box: SecretBox;
  sender: SenderSettings;
  blobs: BlobStore;
  /** Loaded on first use: a process that never searches never loads the model. */
  embedder: () => Promise<Embedder>;
  /** The dense index of this process (its cache is cleared by knowledge-base change notices). */
  denseIndex: DenseIndex;
  llm?: LlmSettings | null;
  /** The msgapp provider; null when none is configured (sends then fail with a clear reason). */
  msgapp?: MsgappProvider | null;
  /** Speech-to-text for widget voice notes and audio/video uploads; null/absent: none. */
  transcriber?: Transcriber | null;
  /** Describes images and video frames for the agent (VISION_MODEL); null: OCR and transcripts only. */
  vision?: ImageDescriber | null;
  /** Usage prices (BILLING_*); default the config's defaults. */
  prices?: Prices;
  /** The operator's models on the installation's key (LLM_ALLOWED_MODELS, LLM_MAX_TOKENS_CAP, LLM_MODEL_PRICES); default LLM_MODEL only, cap 4,096. */
  models?: ModelPolicyOptions;
  /** Text extraction of widget uploads: the process's extraction pool, shared with indexing. */
  extract: ExtractFn;
  /** Widget uploads whose text is longer than this are also indexed for search. */
  uploadIndexChars?: number;
  /** Longest widget voice note taken, in seconds (WIDGET_TRANSCRIBE_MAX_SECONDS, at most TRANSCRIBE_MAX_SECONDS); absent: the transcriber's own cap. */
  widgetMediaMaxSeconds?: number;
  /** The process's work pool (extraction's): widget voice notes take turns in its anonymous lane. Absent: they run as they come. */
  workPool?: FairPool;
  /** PUBLIC_BASE_URL: the origin of every link handed out (media links). Absent: the default HOST and PORT's address. */
  publicBaseUrl?: string;
  /** Structured extraction's model and limits; absent: no model (503 llm_not_configured). */
  structured?: StructuredSettings | null;
  /** Voice limits (VOICE_MAX_CONCURRENT; credits per minute from `prices`). */
  voiceMaxConcurrent?: number;
  /** VOICE_MAX_SESSIONS_PER_VISITOR / _PER_ADDRESS, VOICE_SLOTS_RESERVED_FOR_API, VOICE_JOIN_TIMEOUT_SECONDS (ms); absent: the defaults. */
  voiceCaps?: { perVisitor: number; perAddress: number; reservedForApi: number; joinWindowMs: number };
  /** Why voice chat / dial-out cannot run here (init's capability_warnings); absent: neither can. */
  voicePrereqs?: VoicePrereqs;
  /** The telephony provider's kind, read when a call is placed (compose decides the voice parts after the services); absent: none. */
  telephonyKind?: string | null;
  /** The voice transport (rooms of browser sessions), read when a session starts (compose decides the voice parts after the services); absent: none (503 voice_chat_prereq_failed). */
  voiceTransport?: VoiceTransport | null;
  /** The Temporal client wrappers, read when used (compose builds them after the services); absent: no workflow service (503 workflow_unavailable). */
  workflows?: WorkflowRuns | null;
  /** The Temporal UI (TEMPORAL_UI_ORIGIN's first origin) and namespace, read when used: the debugger links to workflows there. */
  temporalUi?: () => { origin: string | null; namespace: string };
  /** Where the services log. */
  log: Logger;
  /** The console's session lifetimes (CONSOLE_SESSION_*); absent: 12 hours idle, 7 days in all. */
  sessions?: SessionSettings;
  /** Sends the console's invitations and password resets (SMTP_URL); absent or null: none are mailed. */
  mailer?: Mailer | null;
}

const DEFAULT_PRICES: Prices = { currency: 'USD', msgapp_message: 0.005, structured_extraction_page: 0.01, llm_1k_tokens: 0.002, voice_minute_credits: 1 };

export function createServices(em: EntityManager, opts: ServiceOptions): Services {
  const baseUrl = opts.publicBaseUrl ?? publicBaseUrl(configSchema.parse({}));
  const repos = createRepositories();
  const customers = new CustomerService(em, repos);
  const sites = new SiteService(em, opts.box, repos);
  const transcriber = opts.transcriber ?? null;
  const search = new SearchService(em, opts.embedder, opts.denseIndex, repos.kb);
  const transcript = new ChatTranscript(em, repos.conversations);
  const feedback = new FeedbackService(em, transcript);
  const mcp = new McpService(em, opts.box, { policy: opts.sender.policy, resolve: opts.sender.resolve }, repos.credentials);
  const credentials = new CredentialService(em, opts.box, { msgapp: opts.msgapp ?? null, listModels: listOpenAiModels, policy: opts.sender.policy, resolve: opts.sender.resolve, ca: opts.sender.ca }, repos.credentials, repos.workspaces);
  const folders = new FolderService(em, repos.kb, repos.agents);
  const uploadParts = createUploadServices({
    em,
    repos,
    blobs: opts.blobs,
    box: opts.box,
    transcriber,
    vision: opts.vision ?? null,
    extract: opts.extract,
    embedder: opts.embedder,
    indexChars: opts.uploadIndexChars,
    maxMediaSeconds: opts.widgetMediaMaxSeconds,
    pool: opts.workPool,
    publicBaseUrl: baseUrl,
  });
  const prices = opts.prices ?? DEFAULT_PRICES;
  const models = new ModelPolicy(opts.llm?.model ?? null, opts.models);
  const credits = new CreditService(em, prices, models);
  const team = new TeamService(em);
  const voice = new VoiceSessionService(em, credits, { maxConcurrent: opts.voiceMaxConcurrent ?? 5, creditsPerMinute: prices.voice_minute_credits, ...opts.voiceCaps }, repos.blobRefs);
  const widget = new WidgetSessionService(em, sites, customers, repos, transcript, {
      transcriber: transcriber !== null,
      vision: Boolean(opts.vision),
      // Read on each init: compose decides them after the services exist.
      voice: () => opts.voicePrereqs,
      canPayVoice: async (workspaceId) => (await credits.balance(workspaceId)).balance >= prices.voice_minute_credits,
      ownTrunk: (workspaceId) => credentials.hasSipTrunk(workspaceId),
      teamStatus: (workspaceId) => team.statusFor(workspaceId),
  });
  const tasks = new TaskService(em);
  const messages = new MessageService(em, repos, new SendPlanner(repos), transcript, credentials, opts.msgapp ?? null);
  // The workflow clients are read on each use: compose builds them after the services.
  const workflows = () => opts.workflows ?? null;
  const calls = new CallService(em, repos, voice, { box: opts.box, publicBaseUrl: baseUrl }, () => opts.voicePrereqs, prices.call_minute_credits, prices.voice_minute_credits, () => workflows()?.voice ?? null, (ws) => credentials.hasSipTrunk(ws));
  const dialOut = new DialOut({ sessions: voice, calls, runs: () => workflows()?.voice ?? null, telephonyKind: () => opts.telephonyKind ?? null });
  const structured = new StructuredExtractionService({ em, usage: repos.usage, blobs: opts.blobs, extract: opts.extract, settings: opts.structured ?? { ...DEFAULT_STRUCTURED, llm: null }, openModel: openAiCompatible });
  const subscriptions = new SubscriptionService(em, opts.box, opts.sender, repos.webhooks);
  const sessions = new SessionService(em, opts.sessions ?? DEFAULT_SESSION_SETTINGS);
  const totp = new TotpService(em, opts.box);
  const people = new PeopleService(em, sessions, new LinkService(baseUrl), { mailer: opts.mailer ?? null, log: opts.log, workspaces: repos.workspaces, secondFactor: totp.checkSignIn });
  const deliveries = new DeliveryService(em, opts.box, opts.sender, repos.webhooks);
  const agentService = new AgentService(em, { provider: opts.msgapp ?? null, credentials, folders, models, rows: repos.agents, kb: repos.kb, writer: { llm: opts.llm ?? null, openModel: openAiCompatible } });
  const providerEvents = new ProviderEventService(em, repos, transcript, opts.box, opts.blobs, opts.msgapp ?? null, baseUrl, opts.extract, opts.vision ?? null);
  const inbox = new InboxService({
    em,
    conversations: new ConversationInbox(em),
    store: new InboxStore(em),
    transcript,
    messages,
    agents: { get: (workspaceId, id) => built.agents.get(workspaceId, id) },
    calls,
    uploadSearch: uploadParts.uploadSearch,
    uploads: uploadParts.uploads,
    kbFile: (workspaceId, fileId) => repos.kb.downloadableKbFile(em.fork(), workspaceId, fileId, { folder_ids: [], file_ids: [fileId] }),
    runs: () => workflows()?.conversations ?? null,
  });
  const built: Services = {
    inbox,
    sites,
    widget,
    widgetChat: new WidgetChat({ widget, ...uploadParts, transcript, tasks, feedback, conversations: () => workflows()?.conversations ?? null }),
    widgetFiles: new WidgetFiles({ widget, blobs: opts.blobs, ...uploadParts, runs: workflows }),
    dialOut,
    widgetVoice: new WidgetVoice({ widget, sessions: voice, calls, dialOut, transport: () => opts.voiceTransport ?? null, runs: () => workflows()?.voice ?? null }),
    documents: new DocumentExtractions({ structured, runs: () => workflows()?.extractions ?? null }),
    webhookRetryRuns: new WebhookRetryRuns({ subscriptions, deliveries, runs: () => workflows()?.webhooks ?? null }),
    voice,
    calls,
    ...uploadParts,
    apiKeys: new ApiKeyService(em, opts.keyCache, repos.workspaces, opts.box),
    people,
    sessions,
    totp,
    audit: new AuditLog(em),
    // Identity providers are reached as other provider URLs are (SSRF policy, pinned connections), 10 s a request.
    sso: new SsoService(em, opts.box, sessions, people, { policy: opts.sender.policy, resolve: opts.sender.resolve, ca: opts.sender.ca, timeoutMs: 10_000 }, baseUrl, opts.log),
    publicBaseUrl: baseUrl,
    folders,
    idempotency: new IdempotencyStore(em, opts.idempotencyTtlHours, opts.box),
    subscriptions,
    deliveries,
    files: new FileService(em, opts.blobs, repos.kb, repos.blobRefs),
    blobs: opts.blobs,
    agentTrials: new AgentTrials({ em, repos, agents: agentService, conversations: () => workflows()?.conversations ?? null }),
    agents: agentService,
    customers,
    conversations: new ConversationService(em, repos.conversations),
    conversationDebugger: new ConversationDebugger({
      conversations: new ConversationService(em, repos.conversations),
      histories: () => workflows()?.histories,
      audit: new AuditLog(em),
      temporalUi: opts.temporalUi ?? (() => ({ origin: null, namespace: 'default' })),
    }),
    analytics: new AnalyticsService(em, feedback, transcript),
    credits,
    mcp,
    messages,
    outbound: new OutboundMessages({ messages, runs: () => workflows()?.messages ?? null }),
    credentials,
    support: new SupportService(em, repos.workspaces),
    team,
    msgappWebhooks: cloudApiWebhooks,
    providerEvents,
    providerWebhook: new ProviderWebhook(providerEvents),
    repos,
    box: opts.box,
    llm: opts.llm ?? null,
    openModel: openAiCompatible,
    models,
    search,
    transcript,
    feedback,
    tasks,
    structured,
    turns: new AgentTurns({
      em,
      repos,
      transcript,
      search,
      uploads: agentUploads(uploadParts),
      model: opts.llm ? openAiCompatible(opts.llm) : null,
      log: opts.log,
      mcp,
      models: { policy: models, credentials, open: openAiCompatible },
      publisher: new ChatFramePublisher(em),
    }),
  };
  return built;
}
