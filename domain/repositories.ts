import { AgentRepository } from './agents/repository';
import { ConversationRepository } from './conversations/repository';
import { CustomerRepository } from './customers/repository';
import { KnowledgeBaseRepository } from './kb/repository';

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
}

export function createRepositories(): Repositories {
  return {
    conversations: new ConversationRepository(),
    agents: new AgentRepository(),
    kb: new KnowledgeBaseRepository(),
    customers: new CustomerRepository(),
  };
}
