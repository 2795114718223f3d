import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { presets } from './presets';

const { purgeExpiredIdempotencyKeys, purgeExpiredRateLimits } = proxyActivities<Activities>(presets.maintenance);

export interface PurgeResult {
  idempotencyKeys: number;
  rateLimitWindows: number;
}

/**
 * Housekeeping run by the `maintenance:purge-expired` schedule (hourly): drops
 * Idempotency-Key responses past their 24 h life and stale rate-limit windows.
 */
export async function purgeExpiredWorkflow(): Promise<PurgeResult> {
  const idempotencyKeys = await purgeExpiredIdempotencyKeys();
  const rateLimitWindows = await purgeExpiredRateLimits();
  return { idempotencyKeys, rateLimitWindows };
}
