import type { Client } from '@temporalio/client';
import type { ChatTranscript } from '../../domain/chat/transcript';
import type { WorkflowRuns } from '../../domain/ports/workflow-runs';
import { ConversationWorkflows } from './conversations';
import { ExtractionWorkflows } from './extractions';
import { WorkflowHistoryReader } from './histories';
import { MessageWorkflows } from './messages';
import { TranscriptionWorkflows } from './transcriptions';
import { UploadWorkflows } from './uploads';
import { VoiceWorkflows } from './voice';
import { WebhookWorkflows } from './webhooks';

/**
 * The Temporal client wrappers: everything the API, the domain services (through their
 * ports, domain/ports/workflow-runs.ts) and the worker start, update and signal in Temporal.
 * Built once per process, by app/compose.ts, when a Temporal client is there.
 */
export interface WorkflowClients extends WorkflowRuns {
  conversations: ConversationWorkflows;
  messages: MessageWorkflows;
  uploads: UploadWorkflows;
  transcriptions: TranscriptionWorkflows;
  extractions: ExtractionWorkflows;
  voice: VoiceWorkflows;
  webhooks: WebhookWorkflows;
  histories: WorkflowHistoryReader;
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
    conversations: new ConversationWorkflows(client, taskQueue, deps.transcript),
    messages: new MessageWorkflows(client, taskQueue, eager),
    uploads: new UploadWorkflows(client, taskQueue, eager),
    transcriptions: new TranscriptionWorkflows(client, taskQueue, eager),
    extractions: new ExtractionWorkflows(client, taskQueue, eager, deps.extractWaitMs),
    voice: new VoiceWorkflows(client, taskQueue),
    webhooks: new WebhookWorkflows(client),
    histories: new WorkflowHistoryReader(client),
  };
}
