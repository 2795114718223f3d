import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { RateStore } from '.';

/** The PostgreSQL store's table, created and written by rate-limiter-flexible itself. */
export const RATE_LIMIT_TABLE = 'rate_limits';

/** A rate-limiter-flexible counter of `points` per window over the store (for counters that consume more than one point or give points back). */
export async function flexibleLimiter(store: RateStore, name: string, points: number, windowSeconds: number): Promise<RateLimiterAbstract> {
  const common = { points, duration: windowSeconds, keyPrefix: `concierge_rl_${name}` };
  switch (store.kind) {
    case 'memory':
      return new RateLimiterMemory(common);
    case 'redis':
      return new RateLimiterRedis({ ...common, storeClient: store.client, rejectIfRedisNotReady: true });
    case 'postgres':
      return new Promise<RateLimiterPostgres>((resolve, reject) => {
        const limiter: RateLimiterPostgres = new RateLimiterPostgres(
          { ...common, storeClient: store.pool, storeType: 'pool', tableName: RATE_LIMIT_TABLE, clearExpiredByTimeout: false },
          (err?: Error) => (err ? reject(err) : resolve(limiter)),
        );
      });
  }
}

