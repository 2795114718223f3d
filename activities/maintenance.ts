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
      const em = deps.em.fork();
      // Raw SQL: the table belongs to the rate limiter's store (rate-limiter-flexible), which has no entity.
      const [{ present }] = await em.execute<{ present: boolean }[]>(`select to_regclass('rate_limits') is not null as present`);
      if (!present) return 0;
      const rows = await em.execute<{ n: string }[]>(
        `with gone as (delete from rate_limits where expire is not null and expire < ? returning 1) select count(*) as n from gone`,
        [Date.now() - 3_600_000],
      );
      return Number(rows[0]?.n ?? 0);
    },
  };
}
