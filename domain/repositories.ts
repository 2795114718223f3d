import { AgentRepository } from './agents/repository';
import { ConversationRepository } from './conversations/repository';
import { CredentialRepository } from './credentials/repository';
import { CustomerRepository } from './customers/repository';
import { KnowledgeBaseRepository } from './kb/repository';
import { BlobRefRepository } from './storage/blob-refs';
import { ChatTranscript } from './chat/transcript';
import { StructuredExtractionService } from './extraction/extractions';
import { PgRecordingSpool } from './voice/spool';
import { VoiceSessionService } from './voice/sessions';
import { UploadService } from './widget/uploads/records';
import { UsageRecordRepository } from './billing/usage-records';
import { WebhookRepository } from './webhooks/emitter';
import { SiteRepository } from './widget/site-repository';
import { DialOutPolicyRepository } from './voice/destinations';
import { WorkspaceRepository } from './workspaces/repository';

/**
 * The repositories of the domain's aggregates: each is the one data path to its tables
 * (no other module queries them). Stateless; every method runs on the EntityManager it
 * is given, so a caller's transaction covers it. Built once by the composition root
 * (app/services.ts) and handed to the services that need another aggregate's rows.
 */
export interface Repositories {
  conversations: ConversationRepository;
  agents: AgentRepository;
  /** Knowledge-base folders, documents and files. */
  kb: KnowledgeBaseRepository;
  customers: CustomerRepository;
  /** Blob holds, and whether any owner still refers to a blob. */
  blobRefs: BlobRefRepository;
  credentials: CredentialRepository;
  /** Billable events (usage_records). */
  usage: UsageRecordRepository;
  /** The webhook outbox (events, deliveries) and the subscriptions' health. */
  webhooks: WebhookRepository;
  sites: SiteRepository;
  /** Workspaces' dial-out destinations. */
  dialOut: DialOutPolicyRepository;
  /** Workspaces: whether one exists, the admin CLI's create and list, the dial-out columns. */
  workspaces: WorkspaceRepository;
}

export function createRepositories(): Repositories {
  const kb = new KnowledgeBaseRepository();
  const workspaces = new WorkspaceRepository();
  return {
    conversations: new ConversationRepository(),
    agents: new AgentRepository(),
    kb,
    customers: new CustomerRepository(),
    // Every kind of owner of blobs, once; each module counts its own rows (a blob no owner refers to may go).
    blobRefs: new BlobRefRepository([
      { name: 'knowledge-base file', uses: (em, sha256) => kb.filesOfBlob(em, sha256) },
      { name: 'widget upload', uses: (em, sha256) => UploadService.blobUses(em, sha256) },
      // Only while it runs: a finished extraction keeps its text, not its bytes.
      { name: 'structured extraction', uses: (em, sha256) => StructuredExtractionService.blobUses(em, sha256) },
      { name: 'recording', uses: (em, sha256) => VoiceSessionService.blobUses(em, sha256) },
      { name: 'voice spool chunk', uses: (em, sha256) => PgRecordingSpool.blobUses(em, sha256) },
      { name: 'inbound msgapp media', uses: (em, sha256) => ChatTranscript.blobUses(em, sha256) },
    ]),
    credentials: new CredentialRepository(),
    usage: new UsageRecordRepository(),
    webhooks: new WebhookRepository(),
    sites: new SiteRepository(),
    dialOut: new DialOutPolicyRepository(workspaces),
    workspaces,
  };
}
