import { agentReplyId } from '../../app/temporal-clients/conversations';
import { messageSendWorkflowId } from '../../workflows/message-send';
import { msgappInboundWorkflowId, type MsgappInboundResult } from '../../workflows/msgapp-inbound';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { msgappInbound } from '../../worker/outbox-sources';
import { testLogger } from './secret-log';
import { workflowResult, type TestWorker } from './temporal';

/**
 * The worker's relay of inbound msgapp messages (as worker/runtime.ts runs it), with a
 * short sweep: what the webhook stores becomes `msgapp-inbound:<wamid>` workflows.
 */
export async function startInboundDispatcher(tw: TestWorker): Promise<OutboxDispatcher> {
  const d = new OutboxDispatcher(tw.composition.notifications!, [msgappInbound(tw.composition.services.providerEvents, tw.client, { taskQueue: tw.taskQueue })], testLogger(), 500);
  await d.start();
  return d;
}

/**
 * Waits for an inbound message's workflow (started by the relay) to finish and, when the
 * agent answers it, for the reply's send (`message-send:<reply id>`) too, so what a test
 * sends next is not overtaken by the agent. `reply: false`: the agent will not send (a
 * human has the conversation).
 */
export async function inboundDone(tw: TestWorker, providerMessageId: string, opts: { reply?: boolean } = {}): Promise<MsgappInboundResult> {
  const done = await workflowResult<MsgappInboundResult>(tw.client, msgappInboundWorkflowId(providerMessageId));
  if (done.status === 'recorded' && done.answered && opts.reply !== false) await workflowResult(tw.client, messageSendWorkflowId(agentReplyId(done.messageId)), 30_000);
  return done;
}
