// Workflows for bench/tools/temporal-ceiling.ts only: the delivery workflow's shape with
// no-op activities, so the Temporal server's own cost per workflow can be measured.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { CeilingActivities } from './activities';

const opts = { startToCloseTimeout: '15 seconds', retry: { maximumAttempts: 1 } } as const;

/** As webhookDeliveryWorkflow on success: one attempt activity, one outcome activity. */
export async function twoActivities(): Promise<string> {
  const { attempt, outcome } = proxyActivities<CeilingActivities>(opts);
  await attempt();
  await outcome();
  return 'delivered';
}

/** The same with local activities: no activity tasks, results recorded as markers. */
export async function twoLocalActivities(): Promise<string> {
  const { attempt, outcome } = proxyLocalActivities<CeilingActivities>(opts);
  await attempt();
  await outcome();
  return 'delivered';
}

/** One attempt activity and nothing else. */
export async function oneActivity(): Promise<string> {
  const { attempt } = proxyActivities<CeilingActivities>(opts);
  await attempt();
  return 'delivered';
}
