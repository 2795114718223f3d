import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { DomainError } from '../../domain/errors';
import { deliveryRunSignal, deliveryWorkflowId, retryNowSignal } from '../../workflows/webhook-delivery';
import { workflowUnavailable } from './uploads';
import type { DeliveryRuns } from '../../domain/ports/workflow-runs';

/** Webhook deliveries as the API sees them in Temporal: "retry now" skips the backoff wait of a delivery's retry run. */
export class WebhookWorkflows implements DeliveryRuns {
  constructor(private readonly client: Client) {}

  /** Signals the delivery's open run; its next attempt is made at once (a run between attempts makes it after the one under way). */
  async retryNow(deliveryId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(deliveryWorkflowId(deliveryId)).signal(retryNowSignal);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new DomainError('delivery_not_retrying', `Delivery '${deliveryId}' has no retry run waiting`);
      throw workflowUnavailable('The workflow service could not be reached; try again');
    }
  }

  /**
   * Deliveries whose retry run waits open as `failed` (at most `limit`): the reconciliation checks each against its
   * record, since a later run may have been delivered by the dispatcher without its word reaching the run.
   */
  async waitingFailed(limit: number): Promise<string[]> {
    const ids: string[] = [];
    const query = "WorkflowType = 'webhookDeliveryWorkflow' AND ConciergeDeliveryStatus = 'failed' AND ExecutionStatus = 'Running'";
    for await (const wf of this.client.workflow.list({ query })) {
      if (wf.workflowId.startsWith('webhook-delivery:')) ids.push(wf.workflowId.slice('webhook-delivery:'.length));
      if (ids.length >= limit) break;
    }
    return ids;
  }

  /** Tells a delivery's waiting run that run `run` was delivered (it records `delivered` and completes; an earlier or equal run is ignored). */
  async tellDelivered(deliveryId: string, run: number): Promise<void> {
    await this.client.workflow.getHandle(deliveryWorkflowId(deliveryId)).signal(deliveryRunSignal, { run, outcome: 'delivered', error: null });
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
