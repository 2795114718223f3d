import type { Redis } from 'ioredis';
import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../errors';
import type { Pool } from 'pg';
import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { flexibleLimiter, RATE_LIMIT_TABLE } from './store';
import { WIDGET_WORK_LIMITS, WidgetWorkQuota, type WidgetWorkLimits } from './work-quota';

/** The outcome of counting one request against one limit. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the current window ends. */
  resetMs: number;
}

/** A fixed one-minute window counter. Implementations must hold across processes when they share a store. */
export interface RateLimiter {
  readonly limit: number;
  consume(key: string): Promise<RateDecision>;
}

export type RateStore =
  | { kind: 'memory' }
  | { kind: 'redis'; client: Redis }
  | { kind: 'postgres'; pool: Pool };

/** The spec's window: one minute. Tests pass a shorter one. */
export const WINDOW_SECONDS = 60;

/** Backed by rate-limiter-flexible, whose Redis and PostgreSQL counters are atomic. */
class FlexibleRateLimiter implements RateLimiter {
  constructor(
    readonly limit: number,
    private readonly impl: RateLimiterAbstract,
  ) {}

  async consume(key: string): Promise<RateDecision> {
    try {
      const res = await this.impl.consume(key, 1);
      return { allowed: true, limit: this.limit, remaining: res.remainingPoints, resetMs: res.msBeforeNext };
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        return { allowed: false, limit: this.limit, remaining: 0, resetMs: err.msBeforeNext };
      }
      throw err;
    }
  }
}

export { RATE_LIMIT_TABLE, flexibleLimiter } from './store';

/**
 * Removes windows of the PostgreSQL store that ended over an hour ago (the store is told
 * not to clear them itself, so no process runs a timer for it); 0 when the store's table
 * does not exist (memory or redis store). Returns the rows removed.
 */
export async function purgeExpiredRateLimits(em: EntityManager): Promise<number> {
  // raw SQL: the table is rate-limiter-flexible's own (it creates it), so there is no entity; whether it exists at all is a catalogue question.
  // eslint-disable-next-line no-restricted-syntax
  const [{ present }] = await em.execute<{ present: boolean }[]>(`select to_regclass('${RATE_LIMIT_TABLE}') is not null as present`);
  if (!present) return 0;
  // raw SQL: as above, no entity for the store's table; the count comes back from the delete itself.
  // eslint-disable-next-line no-restricted-syntax
  const rows = await em.execute<{ n: string }[]>(
    `with gone as (delete from ${RATE_LIMIT_TABLE} where expire is not null and expire < ? returning 1) select count(*) as n from gone`,
    [Date.now() - 3_600_000],
  );
  return Number(rows[0]?.n ?? 0);
}

export async function createRateLimiter(store: RateStore, name: string, limit: number, windowSeconds = WINDOW_SECONDS): Promise<RateLimiter> {
  return new FlexibleRateLimiter(limit, await flexibleLimiter(store, name, limit, windowSeconds));
}

/** The widget's site checks that refuse a request after looking the site up. */
const REFUSAL_CODES = new Set(['unknown_site', 'origin_not_allowed', 'site_suspended']);

/**
 * Refused widget requests (unknown site, refused Origin, suspended site) per client
 * address, so an address that keeps presenting bad site ids or origins is answered 429
 * before any lookup: once its budget for the window is spent, `guard` refuses without
 * running the lookup at all.
 *
 * Counted in this process's memory on purpose: the point is to shed that load with no
 * I/O, and a shared store would itself be a query (the PostgreSQL store is a table).
 * With N API processes an address gets at most N times the budget, still a hard bound.
 */
export class RefusalLimiter {
  private readonly impl: RateLimiterMemory;

  constructor(
    readonly limit: number,
    windowSeconds = WINDOW_SECONDS,
  ) {
    this.impl = new RateLimiterMemory({ points: limit, duration: windowSeconds, keyPrefix: 'concierge_rl_widget_refusals' });
  }

  /** 429 `rate_limited` (Retry-After) when `key` has used up its refusals; memory only. */
  async check(key: string): Promise<void> {
    const res = await this.impl.get(key);
    if (!res || res.consumedPoints < this.limit) return;
    const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
    throw new DomainError('rate_limited', `Too many refused requests (unknown site, Origin not allowed, suspended site) from this address: at most ${this.limit} a minute; retry in ${retryAfter} s`, {}, { retryAfterSeconds: retryAfter });
  }

  /** Runs `work` (the site checks) unless `key` is over its budget; counts the refusal when it throws one. */
  async guard<T>(key: string, work: () => Promise<T>): Promise<T> {
    await this.check(key);
    try {
      return await work();
    } catch (err) {
      // By code, whichever layer threw it: the API answers a refused socket handshake with its own 403 (ChatHub.authorize).
      if (REFUSAL_CODES.has(String((err as { code?: unknown } | null)?.code))) await this.impl.penalty(key, 1);
      throw err;
    }
  }
}

/**
 * Failures counted per key over a window, across processes when the store is shared (the console's sign-in lockout
 * per account): `check` refuses once `limit` failures are counted, without counting anything itself; `fail` counts
 * one; `reset` forgets them (a success).
 */
export class FailureLimiter {
  private constructor(
    readonly limit: number,
    readonly windowSeconds: number,
    private readonly impl: RateLimiterAbstract,
  ) {}

  static async create(store: RateStore, name: string, limit: number, windowSeconds: number): Promise<FailureLimiter> {
    return new FailureLimiter(limit, windowSeconds, await flexibleLimiter(store, name, limit, windowSeconds));
  }

  /** 429 `rate_limited` (Retry-After: until the window of failures ends) once `key` has `limit` failures. */
  async check(key: string, what: string): Promise<void> {
    const res = await this.impl.get(key);
    if (!res || res.consumedPoints < this.limit) return;
    const retryAfter = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
    throw new DomainError('rate_limited', `Too many failed attempts for ${what}: locked for ${retryAfter} s`, {}, { retryAfterSeconds: retryAfter });
  }

  async fail(key: string): Promise<void> {
    await this.impl.penalty(key, 1);
  }

  async reset(key: string): Promise<void> {
    await this.impl.delete(key);
  }
}

/** The console's sign-in limits (docs/security.md "The console"): attempts per client address, failures per account. */
export interface ConsoleCaps {
  /** Sign-in, link and password-reset requests per client address per window. */
  attemptsPerAddress: number;
  /** Failed sign-ins per account (email) per window before it is locked until the window ends. */
  failuresPerAccount: number;
  windowSeconds: number;
}

export const CONSOLE_CAPS: ConsoleCaps = { attemptsPerAddress: 30, failuresPerAccount: 10, windowSeconds: 900 };

export interface ConsoleLimits {
  attemptsPerAddress: RateLimiter;
  failuresPerAccount: FailureLimiter;
  windowSeconds: number;
}

export async function createConsoleLimits(store: RateStore, caps: ConsoleCaps = CONSOLE_CAPS): Promise<ConsoleLimits> {
  return {
    attemptsPerAddress: await createRateLimiter(store, 'console_address', caps.attemptsPerAddress, caps.windowSeconds),
    failuresPerAccount: await FailureLimiter.create(store, 'console_account_failures', caps.failuresPerAccount, caps.windowSeconds),
    windowSeconds: caps.windowSeconds,
  };
}

/**
 * The per-key and per-workspace limits every authenticated request counts against, and
 * the widget's (docs/decisions.md "Widget"): per site and client address, sends per conversation,
 * and refused site checks per client address.
 */
export interface RequestLimits {
  perKey: RateLimiter;
  perWorkspace: RateLimiter;
  widgetClient: RateLimiter;
  widgetSends: RateLimiter;
  widgetRefusals: RefusalLimiter;
  /** Widget uploads and voice notes: in flight and budgets per site and client address, and per site. */
  widgetWork: WidgetWorkQuota;
  /** Dial-out caps (toll fraud): longer windows than the per-minute request limits. */
  dialOut: DialOutLimits;
  /** The console's sign-in: attempts per address, failures per account. */
  console: ConsoleLimits;
}

export interface DialOutCaps {
  /** Calls per window per widget visitor (site and verified phone). */
  perVisitor: number;
  /** Calls per window per client address (widget). */
  perAddress: number;
  /** Calls per window per destination number, every workspace and both entry points. */
  perDestination: number;
  windowSeconds: number;
}

export interface DialOutLimits {
  perVisitor: RateLimiter;
  perAddress: RateLimiter;
  perDestination: RateLimiter;
  windowSeconds: number;
}

/** An hour's window: a phone call is dearer than a request, and a caller re-dialling within minutes is what a cap must catch. */
export const DIAL_OUT_CAPS: DialOutCaps = { perVisitor: 3, perAddress: 10, perDestination: 5, windowSeconds: 3600 };

export async function createDialOutLimits(store: RateStore, caps: DialOutCaps = DIAL_OUT_CAPS): Promise<DialOutLimits> {
  return {
    perVisitor: await createRateLimiter(store, 'dial_out_visitor', caps.perVisitor, caps.windowSeconds),
    perAddress: await createRateLimiter(store, 'dial_out_address', caps.perAddress, caps.windowSeconds),
    perDestination: await createRateLimiter(store, 'dial_out_destination', caps.perDestination, caps.windowSeconds),
    windowSeconds: caps.windowSeconds,
  };
}

/** Counts one dial-out against one cap; over it: 429 `rate_limited` with Retry-After (seconds). */
export async function enforceDialOut(limits: DialOutLimits, which: 'perVisitor' | 'perAddress' | 'perDestination', key: string): Promise<void> {
  const limiter = limits[which];
  const d = await limiter.consume(key);
  if (d.allowed) return;
  const retryAfter = Math.max(1, Math.ceil(d.resetMs / 1000));
  const what = { perVisitor: 'calls per visitor', perAddress: 'calls per client address', perDestination: 'calls to one number' }[which];
  throw new DomainError('rate_limited', `Too many dial-out calls: at most ${limiter.limit} ${what} in ${limits.windowSeconds} s; retry in ${retryAfter} s`, {}, { retryAfterSeconds: retryAfter });
}

export interface WidgetLimits {
  /** Requests a minute per site and client address. */
  perSiteClient: number;
  /** Sends a minute per conversation. */
  sendsPerConversation: number;
  /** Refused requests (unknown site, Origin not allowed, suspended site) a minute per client address. */
  refusalsPerAddress?: number;
  /** Quotas of widget uploads and voice notes (default WIDGET_WORK_LIMITS). */
  work?: Partial<WidgetWorkLimits>;
}

/** docs/decisions.md "Widget" for the first two; refusals: a page that is set up right is never refused at all. */
export const WIDGET_LIMITS: Required<WidgetLimits> = { perSiteClient: 300, sendsPerConversation: 30, refusalsPerAddress: 30, work: WIDGET_WORK_LIMITS };

export async function createRequestLimits(
  store: RateStore,
  perKey: number,
  perWorkspace: number,
  windowSeconds = WINDOW_SECONDS,
  widget: WidgetLimits = WIDGET_LIMITS,
  dialOut: DialOutCaps = DIAL_OUT_CAPS,
  consoleCaps: ConsoleCaps = CONSOLE_CAPS,
): Promise<RequestLimits> {
  return {
    perKey: await createRateLimiter(store, 'key', perKey, windowSeconds),
    perWorkspace: await createRateLimiter(store, 'workspace', perWorkspace, windowSeconds),
    widgetClient: await createRateLimiter(store, 'widget_client', widget.perSiteClient, windowSeconds),
    widgetSends: await createRateLimiter(store, 'widget_sends', widget.sendsPerConversation, windowSeconds),
    widgetRefusals: new RefusalLimiter(widget.refusalsPerAddress ?? WIDGET_LIMITS.refusalsPerAddress, windowSeconds),
    widgetWork: await WidgetWorkQuota.create(store, { ...WIDGET_WORK_LIMITS, ...widget.work }),
    dialOut: await createDialOutLimits(store, dialOut),
    console: await createConsoleLimits(store, consoleCaps),
  };
}

/** Counts one request; over the limit: 429 `rate_limited` with Retry-After (seconds). */
export async function enforce(limiter: RateLimiter, key: string, what: string): Promise<void> {
  const d = await limiter.consume(key);
  if (d.allowed) return;
  const retryAfter = Math.max(1, Math.ceil(d.resetMs / 1000));
  throw new DomainError('rate_limited', `Too many requests: at most ${limiter.limit} ${what} a minute; retry in ${retryAfter} s`, {}, { retryAfterSeconds: retryAfter });
}

/** Opens the store named by `kind`, with what closes it. */
export async function openRateStore(
  kind: 'memory' | 'redis' | 'postgres',
  opts: { redisUrl?: string; databaseUrl: string },
): Promise<{ store: RateStore; close(): Promise<void> }> {
  switch (kind) {
    case 'memory':
      return { store: { kind: 'memory' }, close: async () => undefined };
    case 'redis': {
      const { Redis: IORedis } = await import('ioredis');
      const client = new IORedis(opts.redisUrl ?? 'redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 2, enableOfflineQueue: false });
      await client.connect();
      return { store: { kind: 'redis', client }, close: async () => void (await client.quit().catch(() => undefined)) };
    }
    case 'postgres': {
      const { Pool } = await import('pg');
      const pool = new Pool({ connectionString: opts.databaseUrl, max: 5 });
      return { store: { kind: 'postgres', pool }, close: () => pool.end() };
    }
  }
}
