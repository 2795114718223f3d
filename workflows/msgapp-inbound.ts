import { ActivityFailure, ApplicationFailure, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { localPresets, presets } from './presets';
import { shortSteps } from './short-steps';

/** Short database writes: local activities (see short-steps.ts). */
const { resolveInboundParty, recordInboundMessage } = shortSteps(['resolveInboundParty', 'recordInboundMessage'], presets.dbWrite, localPresets.dbWrite);
const { downloadInboundMedia } = proxyActivities<Activities>(presets.mediaDownload);

/** One workflow per inbound message, named by the provider's message id (wamid). */
export const msgappInboundWorkflowId = (providerMessageId: string) => `msgapp-inbound:${providerMessageId}`;

export interface MsgappInboundInput {
  providerMessageId: string;
}

export type MsgappInboundResult = { status: 'recorded'; messageId: string } | { status: 'duplicate' } | { status: 'gone' };

/**
 * One inbound msgapp message (`msgapp-inbound:<provider message id>`), stored by the
 * webhook: its customer and conversation (found or created), its media downloaded
 * (kept in the history once stored, so a worker lost later never downloads again; a
 * worker lost during the download is replaced and the download runs again), then the
 * message, its conversation event and `message.inbound` in one transaction, once.
 * A download that fails for good records the message with `media_error`.
 */
export async function msgappInboundWorkflow(input: MsgappInboundInput): Promise<MsgappInboundResult> {
  const id = input.providerMessageId;
  const party = await resolveInboundParty('customer and conversation', [id]);
  if (!party) {
    setCurrentDetails('The stored inbound event is gone (its workspace or agent was deleted): nothing recorded.');
    return { status: 'gone' };
  }
  let download: { media?: Record<string, unknown>; error?: string } = {};
  try {
    const media = await downloadInboundMedia.executeWithOptions({ ...presets.mediaDownload, summary: 'download media (if any)' }, [id]);
    if (media) download = { media };
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    const why = cause instanceof ApplicationFailure ? cause.message : 'the provider could not be reached';
    download = { error: `the attachment could not be downloaded: ${why}` };
    setCurrentDetails(`Media download failed for good: ${why}. The message is recorded with media_error.`);
  }
  const recorded = await recordInboundMessage('record message and emit message.inbound', [id, party, download]);
  return recorded.messageId ? { status: 'recorded', messageId: recorded.messageId } : { status: 'duplicate' };
}
