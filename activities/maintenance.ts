import { purgeExpiredRateLimits } from '../core/ratelimit';
import type { ActivityDeps } from './deps';

/** Housekeeping run by the maintenance schedule. */
export function maintenanceActivities(deps: ActivityDeps) {
  return {
    /** Removes Idempotency-Key responses past their 24 h life. */
    async purgeExpiredIdempotencyKeys(): Promise<number> {
      return deps.services.idempotency.purgeExpired();
    },

    /** Removes rate-limit windows that ended over an hour ago (PostgreSQL store only). */
    async purgeExpiredRateLimits(): Promise<number> {
      return purgeExpiredRateLimits(deps.em.fork());
    },
  };
}
