import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { presets } from './presets';

const { purgeExpiredIdempotencyKeys, purgeExpiredRateLimits, reconcileStranded } = proxyActivities<Activities>(presets.maintenance);

export interface PurgeResult {
  idempotencyKeys: number;
  rateLimitWindows: number;
}

/**
 * Housekeeping run by the `maintenance:purge-expired` schedule (hourly): drops
 * Idempotency-Key responses past their 24 h life and stale rate-limit windows.
 * Installation-wide: no workspace, so no ConciergeWorkspaceId.
 */
export async function purgeExpiredWorkflow(): Promise<PurgeResult> {
  const idempotencyKeys = await purgeExpiredIdempotencyKeys.executeWithOptions({ ...presets.maintenance, summary: 'purge expired Idempotency-Key responses' }, []);
  const rateLimitWindows = await purgeExpiredRateLimits.executeWithOptions({ ...presets.maintenance, summary: 'purge stale rate-limit windows' }, []);
  setCurrentDetails(`Purged ${idempotencyKeys} Idempotency-Key responses and ${rateLimitWindows} rate-limit windows.`);
  return { idempotencyKeys, rateLimitWindows };
}

/**
 * Run by the `maintenance:reconcile` schedule (every 5 minutes): settles the records a
 * workflow left in an in-between state without running its own code (`terminate`), so
 * the API never shows them pending or processing for ever. Installation-wide: no
 * ConciergeWorkspaceId. `graceMs`: how long a record must have been untouched (tests: 0).
 */
export async function reconcileStrandedWorkflow(input: { graceMs?: number } = {}) {
  const settled = await reconcileStranded.executeWithOptions({ ...presets.maintenance, summary: 'settle records whose workflow ended without settling them' }, [input]);
  setCurrentDetails(
    `Settled: ${settled.deliveries} deliveries (failed), ${settled.files} files (error), ${settled.messages} messages (failed), ${settled.uploads} uploads (error), ${settled.tasks} tasks (failed), ${settled.voiceSessions ?? 0} voice sessions (failed), ${settled.calls ?? 0} calls (failed), ${settled.extractions ?? 0} extractions (failed).`,
  );
  return settled;
}
