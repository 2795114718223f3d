import { AgentRepository } from './agents/repository';
import { ConversationRepository } from './conversations/repository';
import { CredentialRepository } from './credentials/repository';
import { CustomerRepository } from './customers/repository';
import { KnowledgeBaseRepository } from './kb/repository';
import { BlobRefRepository } from './storage/blob-refs';
import { UsageRecordRepository } from './billing/usage-records';
import { WebhookRepository } from './webhooks/emitter';
import { SiteRepository } from './widget/site-repository';
import { DialOutPolicyRepository } from './voice/destinations';

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
}

export function createRepositories(): Repositories {
  return {
    conversations: new ConversationRepository(),
    agents: new AgentRepository(),
    kb: new KnowledgeBaseRepository(),
    customers: new CustomerRepository(),
    blobRefs: new BlobRefRepository(),
    credentials: new CredentialRepository(),
    usage: new UsageRecordRepository(),
    webhooks: new WebhookRepository(),
    sites: new SiteRepository(),
    dialOut: new DialOutPolicyRepository(),
  };
}
