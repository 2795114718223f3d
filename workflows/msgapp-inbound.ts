import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { presets } from './presets';

const { resolveInboundParty, recordInboundMessage } = proxyActivities<Activities>(presets.dbWrite);
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
  const party = await resolveInboundParty(input.providerMessageId);
  if (!party) return { status: 'gone' };
  let download: { media?: Record<string, unknown>; error?: string } = {};
  try {
    const media = await downloadInboundMedia(input.providerMessageId);
    if (media) download = { media };
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    const why = cause instanceof ApplicationFailure ? cause.message : 'the provider could not be reached';
    download = { error: `the attachment could not be downloaded: ${why}` };
  }
  const recorded = await recordInboundMessage(input.providerMessageId, party, download);
  return recorded.messageId ? { status: 'recorded', messageId: recorded.messageId } : { status: 'duplicate' };
}
