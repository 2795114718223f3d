import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { SendPlan } from '../core/messages/plan';
import { presets } from './presets';

const { recordMessage, markMessageSent, markMessageFailed } = proxyActivities<Activities>(presets.dbWrite);
/** The provider call: retried only for transient failures (5xx, 429, transport); a 4xx is final (ProviderRejected). */
const { callMsgappProvider } = proxyActivities<Activities>(presets.providerCall);

/** One workflow per outbound message. */
export const messageSendWorkflowId = (messageId: string) => `message-send:${messageId}`;

export type MessageSendResult = { status: 'sent'; providerMessageId: string } | { status: 'failed'; error: string };

/**
 * One workflow per outbound message (`message-send:msg_…`): record it, call the provider
 * once it is recorded, then mark it sent (usage row and `message.status` event in the
 * same transaction) or failed. The provider's answer is kept in the workflow history,
 * so a worker lost after the provider accepted resumes at the marking step and never
 * sends again.
 */
export async function messageSendWorkflow(plan: SendPlan): Promise<MessageSendResult> {
  await recordMessage(plan);
  let providerMessageId: string;
  try {
    providerMessageId = await callMsgappProvider(plan);
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    const error = cause instanceof ApplicationFailure ? cause.message : 'the provider could not be reached';
    await markMessageFailed(plan, error);
    return { status: 'failed', error };
  }
  await markMessageSent(plan, providerMessageId);
  return { status: 'sent', providerMessageId };
}
