import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApiError } from '../core/errors';
import { deliveryWorkflowId, retryNowSignal } from '../workflows/webhook-delivery';
import { workflowUnavailable } from './uploads';

/** Webhook deliveries as the API sees them in Temporal: "retry now" skips the backoff wait of a delivery's retry run. */
export class WebhookGateway {
  constructor(private readonly client: Client) {}

  /** Signals the delivery's open run; its next attempt is made at once (a run between attempts makes it after the one under way). */
  async retryNow(deliveryId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(deliveryWorkflowId(deliveryId)).signal(retryNowSignal);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new ApiError(409, 'delivery_not_retrying', `Delivery '${deliveryId}' has no retry run waiting`);
      throw workflowUnavailable('The workflow service could not be reached; try again');
    }
  }

  /**
   * Cancels the open runs of a deleted subscription's deliveries (exhausted ones wait for a retry that can no longer
   * come; the others would find their delivery gone at the next attempt): they end `cancelled`, so the `failed`
   * view keeps listing only deliveries that exist and are failed. Returns how many were asked to cancel.
   */
  async cancelRunsOf(subscriptionId: string): Promise<number> {
    const query = `WorkflowType = 'webhookDeliveryWorkflow' AND ConciergeSubscriptionId = '${subscriptionId.replace(/[^A-Za-z0-9_-]/g, '')}' AND ExecutionStatus = 'Running'`;
    let n = 0;
    for await (const wf of this.client.workflow.list({ query })) {
      await this.client.workflow
        .getHandle(wf.workflowId, wf.runId)
        .cancel()
        .catch(() => undefined);
      n++;
    }
    return n;
  }
}
