import type { Client } from '@temporalio/client';
import type { ChatTranscript } from '../../domain/chat/transcript';
import type { WorkflowRuns } from '../../domain/workflow-runs';
import { ConversationGateway } from './conversations';
import { ExtractionGateway } from './extractions';
import { MessageSender } from './messages';
import { TranscriptionGateway } from './transcriptions';
import { UploadGateway } from './uploads';
import { VoiceGateway } from './voice';
import { WebhookGateway } from './webhooks';

/**
 * The Temporal client wrappers: everything the API, the domain services (through their
 * ports, domain/workflow-runs.ts) and the worker start, update and signal in Temporal.
 * Built once per process, by app/compose.ts, when a Temporal client is there.
 */
export interface WorkflowClients extends WorkflowRuns {
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
export function createWorkflowClients(client: Client, taskQueue: string, deps: { transcript: ChatTranscript; eagerStart?: boolean; extractWaitMs?: number }): WorkflowClients {
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
