import { ActivityFailure, ApplicationFailure, patched, proxyActivities, proxyLocalActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { localPresets, presets } from './presets';
import { shortSteps } from './short-steps';

/** Short database writes: local activities (see short-steps.ts). */
const { resolveInboundParty, recordInboundMessage } = shortSteps(['resolveInboundParty', 'recordInboundMessage'], presets.dbWrite, localPresets.dbWrite);
const { downloadInboundMedia } = proxyActivities<Activities>(presets.mediaDownload);
const { readInboundMedia } = proxyActivities<Activities>(presets.uploadExtraction);
/** A short call to Temporal (update-with-start of the actor): local, retried until it lands. */
const { handInboundToAgent } = proxyLocalActivities<Activities>(localPresets.bookkeeping);

/**
 * The patch that hands a recorded message to its conversation's actor (the agent
 * answers on msgapp). Runs recorded before it end at the record step when replayed.
 */
export const INBOUND_TO_AGENT_PATCH = 'inbound-to-agent';

/** One workflow per inbound message, named by the provider's message id (wamid). */
export const msgappInboundWorkflowId = (providerMessageId: string) => `msgapp-inbound:${providerMessageId}`;

export interface MsgappInboundInput {
  providerMessageId: string;
  /**
   * Whether the stored message carries media (the relay reads it from the stored event).
   * false: there is nothing to download, and the download step (an activity, a round trip
   * through the task queue) is skipped. Absent (runs started before the field): the step
   * runs, and finds nothing to download when there is none.
   */
  media?: boolean;
}

export type MsgappInboundResult =
  | { status: 'recorded'; messageId: string; /** Handed to the conversation's actor, which answers it. */ answered?: boolean; /** Why the agent does not answer. */ silence?: string }
  | { status: 'duplicate' }
  | { status: 'gone' };

/**
 * One inbound msgapp message with media (`msgapp-inbound:<provider message id>`), stored by
 * the webhook (a message without media is recorded by the webhook itself and handed to its
 * actor by the relay; runs started for one before that, with `media: false`, still work): its customer and conversation (found or created), its media (if any: a
 * message without media skips the step) downloaded (kept in the history once stored, so a worker lost later never downloads again; a
 * worker lost during the download is replaced and the download runs again), then the
 * message, its conversation event and `message.inbound` in one transaction, once; its
 * media read as text for the agent (extractors, transcriber).
 * A download that fails for good records the message with `media_error`. Then the
 * message goes to its conversation's actor (`conversation:conv_…`, as web chat), whose
 * agent answers it through the message-send workflow, unless the number's agent does
 * not answer (not published, no sender action): then it is only recorded and emitted.
 */
export async function msgappInboundWorkflow(input: MsgappInboundInput): Promise<MsgappInboundResult> {
  const id = input.providerMessageId;
  const party = await resolveInboundParty('customer and conversation', [id]);
  if (!party) {
    setCurrentDetails('The stored inbound event is gone (its workspace or agent was deleted): nothing recorded.');
    return { status: 'gone' };
  }
  let download: { media?: Record<string, unknown>; error?: string } = {};
  if (input.media !== false) {
    try {
      const media = await downloadInboundMedia.executeWithOptions({ ...presets.mediaDownload, summary: 'download media (if any)' }, [id]);
      if (media) download = { media };
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : err;
      const why = cause instanceof ApplicationFailure ? cause.message : 'the provider could not be reached';
      download = { error: `the attachment could not be downloaded: ${why}` };
      setCurrentDetails(`Media download failed for good: ${why}. The message is recorded with media_error.`);
    }
  }
  const recorded = await recordInboundMessage('record message and emit message.inbound', [id, party, download]);
  if (!recorded.messageId) return { status: 'duplicate' };
  if (!patched(INBOUND_TO_AGENT_PATCH)) return { status: 'recorded', messageId: recorded.messageId };
  if (download.media) {
    // The agent reads media as text (a voice note as its transcript); without it, it is told what was attached.
    try {
      await readInboundMedia.executeWithOptions({ ...presets.uploadExtraction, summary: 'read the media as text' }, [recorded.messageId]);
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : err;
      setCurrentDetails(`The media could not be read as text (${(cause as Error).message}); the agent is told what was attached.`);
    }
  }
  const handed = await handInboundToAgent.executeWithOptions({ ...localPresets.bookkeeping, summary: 'hand to the conversation actor' }, [
    { providerMessageId: id, messageId: recorded.messageId, party },
  ]);
  setCurrentDetails(
    handed.answered
      ? `Recorded as ${recorded.messageId} and handed to conversation:${party.conversationId}, whose agent answers it.`
      : `Recorded as ${recorded.messageId}; not answered: ${handed.reason}.`,
  );
  return { status: 'recorded', messageId: recorded.messageId, answered: handed.answered, ...(handed.reason && !handed.answered ? { silence: handed.reason } : {}) };
}
