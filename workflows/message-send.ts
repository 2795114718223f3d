import { ActivityFailure, ApplicationFailure, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { SendPlan } from '../domain/messaging/plan';
import { cancelled, recordCancelled } from './cancellation';
import { recordOutcome } from './outcome';
import { localPresets, presets } from './presets';
import { shortSteps } from './short-steps';

/** Short database writes: local activities (see short-steps.ts). */
const { recordMessage, markMessageSent, markMessageFailed } = shortSteps(['recordMessage', 'markMessageSent', 'markMessageFailed'], presets.dbWrite, localPresets.dbWrite);
/** The provider call: retried only for transient failures (5xx, 429, transport); a 4xx is final (ProviderRejected). */
const { callMsgappProvider } = proxyActivities<Activities>(presets.providerCall);

/** One workflow per outbound message. */
export const messageSendWorkflowId = (messageId: string) => `message-send:${messageId}`;

/** The error a cancelled send leaves on its message (status `failed`). */
export const SEND_CANCELLED = 'the send was cancelled by an operator before the provider confirmed it';

/** The workflow's summary in the UI: the kind and the recipient's last four digits (never the whole number). */
export const messageSendSummary = (plan: Pick<SendPlan, 'kind' | 'to' | 'templateName'>) =>
  `${plan.kind}${plan.kind === 'template' && plan.templateName ? ` ${plan.templateName}` : ''} → …${plan.to.replace(/\D/g, '').slice(-4)}`;

/** `error` and `reason` are the same text (`error` kept for callers written before `outcome`/`reason`; runs before the outcome-attribute patch lack those two). */
export type MessageSendResult =
  | { status: 'sent'; outcome?: 'succeeded'; providerMessageId: string }
  | { status: 'failed'; outcome?: 'failed'; error: string; reason?: string };

/**
 * One workflow per outbound message (`message-send:msg_…`): record it, call the provider
 * once it is recorded, then mark it sent (usage row and `message.status` event in the
 * same transaction) or failed. The provider's answer is kept in the workflow history,
 * so a worker lost after the provider accepted resumes at the marking step and never
 * sends again. A cancelled send is marked failed (with SEND_CANCELLED) before the run
 * ends, so the message never stays `sending`.
 */
export async function messageSendWorkflow(plan: SendPlan): Promise<MessageSendResult> {
  const failed = (error: string, summary: string) => markMessageFailed(summary, [plan, error]);
  try {
    await recordMessage('record: sending', [plan]);
    let providerMessageId: string;
    try {
      setCurrentDetails(`Calling the provider (retried while it fails transiently, for up to 2 minutes).`);
      providerMessageId = await callMsgappProvider.executeWithOptions({ ...presets.providerCall, summary: `provider: send ${plan.kind}` }, [plan]);
    } catch (err) {
      if (cancelled(err)) throw err;
      const cause = err instanceof ActivityFailure ? err.cause : err;
      const error = cause instanceof ApplicationFailure ? cause.message : 'the provider could not be reached';
      setCurrentDetails(`Failed: ${error}`);
      await failed(error, 'record: failed');
      return { status: 'failed', outcome: recordOutcome('failed'), error, reason: error };
    }
    await markMessageSent('record: sent', [plan, providerMessageId]);
    setCurrentDetails(`Sent: provider message id ${providerMessageId}.`);
    return { status: 'sent', outcome: recordOutcome('succeeded'), providerMessageId };
  } catch (err) {
    if (!cancelled(err)) throw err;
    // A message already marked sent stays sent: markMessageFailed moves only a `sending` one.
    await recordCancelled(() => failed(SEND_CANCELLED, 'record: failed (cancelled)'));
    recordOutcome('cancelled');
    setCurrentDetails(`Cancelled: ${SEND_CANCELLED}.`);
    throw err;
  }
}
