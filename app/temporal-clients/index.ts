import type { Client } from '@temporalio/client';
import type { ChatTranscript } from '../../domain/chat/transcript';
import { ConversationGateway } from './conversations';
import { ExtractionGateway } from './extractions';
import { MessageSender } from './messages';
import { TranscriptionGateway } from './transcriptions';
import { UploadGateway } from './uploads';
import { VoiceGateway } from './voice';
import { WebhookGateway } from './webhooks';

/** What the API starts, updates and signals in Temporal; built by app/compose.ts when a Temporal client is there. */
export interface Gateways {
  conversations: ConversationGateway;
  messages: MessageSender;
  uploads: UploadGateway;
  transcriptions: TranscriptionGateway;
  extractions: ExtractionGateway;
  voice: VoiceGateway;
  webhooks: WebhookGateway;
}

/**
 * `eagerStart`: the client shares its native connection with a worker of this process
 * polling `taskQueue` (`npm start`), so the starts a caller waits for (a send, an
 * upload, a voice note) ask for eager start: the server hands the first workflow task back in the
 * start call's answer, to this process's worker. The conversation's update-with-start
 * cannot ask (the server refuses eager execution in a multi-operation).
 */
export function createGateways(client: Client, taskQueue: string, deps: { transcript: ChatTranscript; eagerStart?: boolean; extractWaitMs?: number }): Gateways {
  const eager = deps.eagerStart ?? false;
  return {
    conversations: new ConversationGateway(client, taskQueue, deps.transcript),
    messages: new MessageSender(client, taskQueue, eager),
    uploads: new UploadGateway(client, taskQueue, eager),
    transcriptions: new TranscriptionGateway(client, taskQueue, eager),
    extractions: new ExtractionGateway(client, taskQueue, eager, deps.extractWaitMs),
    voice: new VoiceGateway(client, taskQueue),
    webhooks: new WebhookGateway(client),
  };
}
