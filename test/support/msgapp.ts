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

/** Waits for an inbound message's workflow (started by the relay) to finish. */
export function inboundDone(tw: TestWorker, providerMessageId: string): Promise<MsgappInboundResult> {
  return workflowResult<MsgappInboundResult>(tw.client, msgappInboundWorkflowId(providerMessageId));
}
