import type { VoiceMedia } from '../domain/voice/media';
import type { VoiceSessionService } from '../domain/voice/sessions';
import type { Telephony } from '../domain/ports/voice';
import type { CallScreening } from '../domain/voice/phone-call';
import type { Logger } from 'pino';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ConversationWorkflows } from '../app/temporal-clients/conversations';
import type { WebhookWorkflows } from '../app/temporal-clients/webhooks';
import type { MessageWorkflows } from '../app/temporal-clients/messages';
import type { IndexingService } from '../domain/kb/indexing';
import type { Services } from '../app/services';

/** Whether a workflow id's latest run is still running, closed (whatever the outcome) or unknown to Temporal. */
export type WorkflowState = 'running' | 'closed' | 'missing';

/** What the activities are closed over: the worker wires real ones, tests their own. */
export interface ActivityDeps {
  em: EntityManager;
  services: Pick<Services, 'idempotency' | 'deliveries' | 'blobs' | 'messages' | 'providerEvents' | 'transcript' | 'turns' | 'uploads' | 'voiceNotes' | 'uploadSearch' | 'tasks' | 'structured' | 'voice' | 'inbox'>;
  indexing: IndexingService;
  /** Asks Temporal about a workflow (the maintenance reconciliation); the worker wires its client. */
  workflowState?: (workflowId: string) => Promise<WorkflowState>;
  /** Delivery retry runs waiting `failed` (the maintenance reconciliation tells them of a later delivered run); the worker wires its client. */
  webhookRuns?: Pick<WebhookWorkflows, 'waitingFailed' | 'tellDelivered'>;
  /** The conversation actors (a customer's msgapp message goes to one); the worker wires its client. */
  conversations?: Pick<ConversationWorkflows, 'customerMessage' | 'send'>;
  /** Voice sessions and calls (the media runner lives in the worker); absent: voice is not configured. */
  voice?: { media: VoiceMedia; sessions: VoiceSessionService; telephony: Telephony | null; log: Logger; screening?: CallScreening };
  /** Starts message-send workflows (eagerly, on this worker, when its client shares the worker's connection). */
  sender?: Pick<MessageWorkflows, 'send'>;
}
