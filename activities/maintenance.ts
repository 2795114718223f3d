import { purgeExpiredRateLimits } from '../lib/ratelimit';
import { indexWorkflowId } from '../workflows/kb-index';
import { deliveryWorkflowId } from '../workflows/webhook-delivery';
import { messageSendWorkflowId } from '../workflows/message-send';
import { widgetUploadWorkflowId } from '../workflows/widget-upload';
import { voiceWorkflowId } from '../workflows/voice';
import { callWorkflowId } from '../workflows/call';
import { structuredExtractionWorkflowId } from '../workflows/structured-extraction';
import { transcribeWorkflowId } from '../workflows/transcribe';
import type { ActivityDeps } from './deps';

/** How long a record may sit in an in-between state before the reconciliation asks Temporal about its workflow. */
export const STRANDED_AFTER_MS = 2 * 60_000;
/** Records looked at per kind and run: the schedule comes back every few minutes for the rest. */
const BATCH = 200;
/** Delivery runs waiting `failed` read per reconciliation (ids only, from Temporal's visibility). */
const WAITING_RUNS_MAX = 10_000;

/** What one reconciliation settled, by kind. */
export interface ReconcileResult {
  deliveries: number;
  /** Retry runs waiting `failed` whose delivery a later run delivered (the dispatcher's word was lost): told, so Temporal says `delivered`. */
  deliveryRuns: number;
  files: number;
  messages: number;
  uploads: number;
  tasks: number;
  /** Voice sessions ended `failed`: the concurrency slot they held is free again. */
  voiceSessions: number;
  calls: number;
  extractions: number;
  /** Voice notes whose transcription ended without releasing them (terminated): their bytes released. */
  voiceNotes: number;
}

/** The reasons a stranded record is left with (the workflow's own code never ran to write one). */
export const STRANDED = {
  delivery: 'the delivery workflow ended without recording an outcome (terminated?); POST …/retry delivers it again',
  file: 'indexing stopped without finishing (its workflow was terminated); upload the file again to index it',
  message: 'the send workflow ended before the provider answer was recorded (terminated?); the message may or may not have reached the customer',
  upload: 'processing stopped without finishing (its workflow was terminated); upload the file again',
  task: 'the task stopped without finishing (its workflow was terminated)',
  voice: 'worker_lost: the voice session\'s workflow ended without ending the session (terminated?)',
  call: 'the call\'s workflow ended without recording how the call ended (terminated?)',
  extraction: 'the extraction stopped without finishing (its workflow was terminated); send the request again',
} as const;

/** Housekeeping run by the maintenance schedules. */
export function maintenanceActivities(deps: ActivityDeps) {
  return {
    /** Removes Idempotency-Key responses past their 24 h life. */
    async purgeExpiredIdempotencyKeys(): Promise<number> {
      return deps.services.idempotency.purgeExpired();
    },

    /** Removes rate-limit windows that ended over an hour ago (PostgreSQL store only). */
    async purgeExpiredRateLimits(): Promise<number> {
      return purgeExpiredRateLimits(deps.em.fork());
    },

    /**
     * Records left in an in-between state by a workflow that no longer runs — `terminate`
     * runs no code, so nothing wrote their outcome — are settled with a reason: a delivery
     * `failed` (POST …/retry works), a file or upload `error`, a message `failed`, a task
     * `failed`. Only records untouched for `graceMs` are looked at, and only those whose
     * workflow is closed or gone are changed; each move is conditional on the state read.
     */
    async reconcileStranded(input: { graceMs?: number } = {}): Promise<ReconcileResult> {
      const state = deps.workflowState;
      if (!state) throw new Error('reconcileStranded needs the Temporal client (ActivityDeps.workflowState)');
      const before = new Date(Date.now() - (input.graceMs ?? STRANDED_AFTER_MS));
      const ended = async (workflowId: string) => (await state(workflowId)) !== 'running';
      const { deliveries, messages, uploads, voiceNotes, tasks } = deps.services;
      const { voice, structured } = deps.services;
      const result: ReconcileResult = { deliveries: 0, deliveryRuns: 0, files: 0, messages: 0, uploads: 0, tasks: 0, voiceSessions: 0, calls: 0, extractions: 0, voiceNotes: 0 };

      for (const d of await deliveries.dispatchedPending(before, BATCH)) {
        if ((await ended(deliveryWorkflowId(d.id))) && (await deliveries.failRun(d.id, d.run, STRANDED.delivery))) result.deliveries++;
      }
      // One truth: a run still saying `failed` while its delivery was delivered by a later run is told now.
      if (deps.webhookRuns) {
        // Every waiting run is looked at (they stay open while failed, so a fixed batch would keep reading the same
        // ones); a run that closed since the listing is skipped, never the rest of the pass.
        for (const id of await deps.webhookRuns.waitingFailed(WAITING_RUNS_MAX)) {
          const current = await deliveries.current(id);
          if (current?.status !== 'delivered') continue;
          if (await deps.webhookRuns.tellDelivered(id, current.run).then(() => true, () => false)) result.deliveryRuns++;
        }
      }
      for (const id of await deps.indexing.dispatchedUnfinished(before, BATCH)) {
        if ((await ended(indexWorkflowId(id))) && (await deps.indexing.fail(id, STRANDED.file))) result.files++;
      }
      for (const id of await messages.stillSending(before, BATCH)) {
        if ((await ended(messageSendWorkflowId(id))) && (await messages.failStranded(id, STRANDED.message))) result.messages++;
      }
      for (const id of await uploads.stillProcessing(before, BATCH)) {
        if ((await ended(widgetUploadWorkflowId(id))) && (await uploads.failExtraction(id, STRANDED.upload))) result.uploads++;
      }
      for (const t of await tasks.stillRunning(before, BATCH)) {
        if (await ended(t.workflow_id)) {
          await tasks.finished({ conversationId: t.conversation_id, taskKey: t.task_key, status: 'failed', error: STRANDED.task });
          result.tasks++;
        }
      }
      // A session or call left open holds a slot of the workspace's voice concurrency until it is ended.
      for (const id of await voice.stillOpen(before, BATCH)) {
        if (await ended(voiceWorkflowId(id))) {
          await voice.markEnded(id, STRANDED.voice, true);
          result.voiceSessions++;
        }
      }
      for (const id of await voice.callsStillOpen(before, BATCH)) {
        if (await ended(callWorkflowId(id))) {
          await voice.callStatus(id, 'failed', { error: STRANDED.call });
          result.calls++;
        }
      }
      for (const id of await structured.stillRunning(before, BATCH)) {
        if (await ended(structuredExtractionWorkflowId(id))) {
          await structured.fail(id, 'internal', STRANDED.extraction);
          result.extractions++;
        }
      }
      // A voice note is not kept: a transcription terminated before its release step leaves its hold, and its bytes.
      for (const hold of await voiceNotes.voiceNotesHeld(before, BATCH)) {
        if (await ended(transcribeWorkflowId(hold.id))) {
          await voiceNotes.releaseVoiceNote(hold.sha256, hold.id);
          result.voiceNotes++;
        }
      }
      return result;
    },
  };
}
