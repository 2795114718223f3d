import { DomainError } from '../../lib/errors';
import type { TurnReply } from '../chat/turn';
import type { WorkflowHistories } from './workflow-history';
import type { Begun, ExtractionOutcome } from '../extraction/extractions';
import type { OperatorAction, OperatorActionResult } from '../inbox/actions';
import type { SendPlan } from '../messaging/plan';
import type { PhoneCallInput } from '../voice/phone-call';
import type { RecordingView } from '../voice/sessions';
import type { StoredUpload, TranscribeOutcome, UploadOutcome, VoiceNote } from '../widget/uploads';

/**
 * What the domain starts, updates and signals in Temporal, as ports: the domain names what
 * it needs, the Temporal client wrappers (app/temporal-clients/) implement it, and the
 * composition root (app/compose.ts) wires them in. No Temporal client is imported here.
 * A port read as `() => … | null` is absent in a process without a workflow service (the
 * admin CLI, an API started without TEMPORAL_ADDRESS): the caller answers 503 workflow_unavailable.
 */

/** What a service answers when its port is absent: this process has no workflow service. */
export const noWorkflowService = () => new DomainError('workflow_unavailable', 'The workflow service is not connected to this API process');

/** A visitor's message as the send hands it to the conversation's actor. */
export interface VisitorSend {
  clientMessageId: string;
  text: string;
  uploadIds: string[];
  /** Uploads long enough to be indexed for search first: each becomes a blocking task. */
  indexUploads: Array<{ uploadId: string; fileName: string }>;
  delivery: 'sync' | 'async';
}

/** What the actor answers a visitor's message (the `visitorMessage` update's result). */
export interface VisitorMessageResult {
  message_id: string;
  reply_id: string;
  /** The actor had this client message id already: no new turn. */
  duplicate: boolean;
  /** Sync delivery: the reply, or why there is none. */
  reply?: TurnReply;
  error?: string;
}

/** The conversation actor (`conversation:<id>`). */
export interface ConversationRuns {
  send(conv: { id: string; workspaceId: string }, send: VisitorSend): Promise<VisitorMessageResult>;
  /** Tells the actors of conversations closed in the database to finish. */
  closed(conversationIds: string[]): Promise<void>;
  /** Cancels a background task of the conversation; false when the actor does not know it. */
  cancelTask(conversationId: string, taskKey: string): Promise<boolean>;
  /** A customer's recorded message on a messaging channel, signalled to its actor (started if not running): one turn per provider message id. */
  customerMessage(conv: { id: string; workspaceId: string; channel: 'msgapp' }, m: { providerMessageId: string; messageId: string }): Promise<void>;
  /** A person's action from the console's inbox, through the actor (started when none runs): its outcome. */
  operatorAction(conv: { id: string; workspaceId: string; channel: 'web' | 'msgapp' | 'voice' }, action: OperatorAction): Promise<OperatorActionResult>;
}

/** A widget upload's extraction (`widget-upload:<upload_id>`): `notStarted` runs when the workflow could not be started. */
export interface UploadRuns {
  extract(stored: StoredUpload, notStarted: () => Promise<void>): Promise<UploadOutcome>;
}

/** A voice note's transcription (`transcribe:<trn_id>`): `notStarted` runs when the workflow could not be started. */
export interface TranscriptionRuns {
  transcribe(note: VoiceNote, site: { id: string; workspace_id: string }, notStarted: () => Promise<void>): Promise<TranscribeOutcome>;
}

/** A dial-out call (`call:call_…`). */
export interface CallRuns {
  startCall(input: PhoneCallInput & { siteId: string | null }): Promise<void>;
  /** Hangs the call up (its workflow hangs up the leg and saves the recordings); an ended call is left as it is. */
  hangUp(callId: string): Promise<void>;
  /** Waits up to `timeoutMs` for the call's workflow to end (recordings saved); false when it still runs then. */
  ended(callId: string, timeoutMs: number): Promise<boolean>;
}

/** A browser voice session (`voice:vs_…`): started once its room exists; stopped, answering its recordings. */
export interface VoiceSessionRuns {
  start(input: { voiceSessionId: string; workspaceId: string; conversationId: string; siteId: string | null }): Promise<void>;
  /** Ends the session and answers with its recordings (an ended session answers the same; 404 not_found when there is none). */
  stop(voiceSessionId: string): Promise<{ ended: true; recordings: RecordingView[] }>;
}

/** A structured extraction (`extract:ext_…`), started or joined and waited for (504 extraction_timeout past the wait). */
export interface ExtractionRuns {
  run(run: Extract<Begun, { kind: 'run' }>): Promise<ExtractionOutcome>;
}

/** A webhook delivery's retry runs (`webhook-delivery:dlv_…`). */
export interface DeliveryRuns {
  /** Skips the backoff wait of the delivery's open run (409 delivery_not_retrying when none waits). */
  retryNow(deliveryId: string): Promise<void>;
  /** Cancels the open runs of a deleted subscription's deliveries; how many were asked to. */
  cancelRunsOf(subscriptionId: string): Promise<number>;
}

/** An outbound msgapp message (`message-send:<message_id>`), waited for. */
export interface MessageRuns {
  send(plan: SendPlan): Promise<{ status: 'sent'; providerMessageId: string } | { status: 'failed'; error: string }>;
}

/** The workflow clients the domain services use; app/temporal-clients' WorkflowClients is one. */
export interface WorkflowRuns {
  conversations: ConversationRuns;
  uploads: UploadRuns;
  transcriptions: TranscriptionRuns;
  voice: CallRuns & VoiceSessionRuns;
  messages: MessageRuns;
  extractions: ExtractionRuns;
  webhooks: DeliveryRuns;
  /** Recorded histories, read back (the console's conversation debugger); absent where nothing reads them. */
  histories?: WorkflowHistories;
}
