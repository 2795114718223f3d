import type { Logger } from 'pino';
import { noWorkflowService, type DeliveryRuns } from '../ports/workflow-runs';
import type { DeliveryService, DeliveryView } from './deliveries';
import type { SubscriptionService } from './subscriptions';

export interface WebhookRetryRunsDeps {
  subscriptions: Pick<SubscriptionService, 'delete'>;
  deliveries: Pick<DeliveryService, 'retryNowTarget'>;
  /** The delivery retry workflow's client; null in a process without a workflow service. */
  runs: () => DeliveryRuns | null;
}

/**
 * What the API asks of deliveries' retry runs (`webhook-delivery:dlv_…`): "retry now"
 * (the backoff wait skipped), and the cancelling of a deleted subscription's open runs.
 */
export class WebhookRetryRuns {
  constructor(private readonly deps: WebhookRetryRunsDeps) {}

  /** A delivery waiting between attempts of its retry run (409 delivery_not_retrying otherwise) makes its next attempt at once. */
  async retryNow(workspaceId: string, subscriptionId: string, deliveryId: string): Promise<DeliveryView> {
    const delivery = await this.deps.deliveries.retryNowTarget(workspaceId, subscriptionId, deliveryId);
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    await runs.retryNow(delivery.id);
    return delivery;
  }

  /**
   * Deletes the subscription; its deliveries are gone with it, so their open retry runs end
   * `cancelled` (in the background: a list and a cancel per run; a failure, logged, only
   * leaves runs for an operator's batch cancel, as docs/operations.md says).
   */
  async deleteSubscription(workspaceId: string, subscriptionId: string, log: Pick<Logger, 'warn'>): Promise<void> {
    await this.deps.subscriptions.delete(workspaceId, subscriptionId);
    const runs = this.deps.runs();
    if (runs) void runs.cancelRunsOf(subscriptionId).catch((err: unknown) => log.warn({ err }, "could not cancel the deleted subscription's delivery runs"));
  }
}
