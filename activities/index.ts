import type { EntityManager } from '@mikro-orm/postgresql';
import type { Services } from '../core/services';

export interface ActivityDeps {
  em: EntityManager;
  services: Pick<Services, 'idempotency'>;
}

/** Every activity, closed over its dependencies: the worker wires real ones, tests their own. */
export function createActivities(deps: ActivityDeps) {
  return {
    /** Removes Idempotency-Key responses past their 24 h life. */
    async purgeExpiredIdempotencyKeys(): Promise<number> {
      return deps.services.idempotency.purgeExpired();
    },

    /** Removes rate-limit windows that ended over an hour ago (PostgreSQL store only). */
    async purgeExpiredRateLimits(): Promise<number> {
      const em = deps.em.fork();
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

export type Activities = ReturnType<typeof createActivities>;
