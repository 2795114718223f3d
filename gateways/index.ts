import type { Client } from '@temporalio/client';
import type { ChatTranscript } from '../core/chat/transcript';
import { ConversationGateway } from './conversations';
import { MessageSender } from './messages';
import { UploadGateway } from './uploads';

/** What the API starts, updates and signals in Temporal; built by core/compose.ts when a Temporal client is there. */
export interface Gateways {
  conversations: ConversationGateway;
  messages: MessageSender;
  uploads: UploadGateway;
}

export function createGateways(client: Client, taskQueue: string, deps: { transcript: ChatTranscript }): Gateways {
  return {
    conversations: new ConversationGateway(client, taskQueue, deps.transcript),
    messages: new MessageSender(client, taskQueue),
    uploads: new UploadGateway(client, taskQueue),
  };
}
