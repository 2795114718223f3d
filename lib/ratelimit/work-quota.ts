import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { DomainError } from '../errors';
import type { RateStore } from '.';
import { flexibleLimiter } from './store';

/**
 * Quotas of anonymous work (widget uploads and voice notes: anyone on the internet may
 * send them, and each costs an extraction or a transcription in the worker). Per site and
 * client address, and per site for all its visitors together.
 */
export interface WidgetWorkLimits {
  /** Files being processed at once per site and client address. */
  inFlightPerAddress: number;
  /** Files being processed at once per site. */
  inFlightPerSite: number;
  /** Files an hour per site and client address. */
  perAddressPerHour: number;
  /** Bytes an hour per site and client address. */
  bytesPerAddressPerHour: number;
  /** Bytes a day per site. */
  bytesPerSitePerDay: number;
}

/** The config's defaults (app/config.ts WIDGET_FILES_*). */
export const WIDGET_WORK_LIMITS: WidgetWorkLimits = {
  inFlightPerAddress: 2,
  inFlightPerSite: 10,
  perAddressPerHour: 60,
  bytesPerAddressPerHour: 200 * 1024 * 1024,
  bytesPerSitePerDay: 5 * 1024 * 1024 * 1024,
};

/**
 * How long an in-flight mark lives if its request never gives it back (the process died):
 * longer than any upload waits for its extraction, so a live one is never dropped early.
 */
const LEASE_SECONDS = 15 * 60;
/** Retry-After for a full in-flight count: no window ends then, but a widget file is usually processed within seconds. */
const IN_FLIGHT_RETRY_SECONDS = 5;

/** A place among the files in flight; `release` gives it back (once). */
export interface WorkLease {
  release(): Promise<void>;
}

const rateLimited = (message: string, retryAfter: number) =>
  new DomainError('rate_limited', `${message}; retry in ${retryAfter} s`, {}, { retryAfterSeconds: retryAfter });

const retryAfterOf = (res: RateLimiterRes) => Math.max(1, Math.ceil(res.msBeforeNext / 1000));

const MB = (bytes: number) => `${Math.round(bytes / (1024 * 1024))} MB`;

/**
 * Counted in the API's rate store (memory, Redis or PostgreSQL: rate-limiter-flexible's
 * atomic counters), so the quotas hold across API processes that share it. In-flight
 * counts are points taken on admission and given back when the request ends; a process
 * that dies holding some loses them after LEASE_SECONDS at the latest.
 */
export class WidgetWorkQuota {
  private constructor(
    readonly limits: WidgetWorkLimits,
    private readonly inFlightAddress: RateLimiterAbstract,
    private readonly inFlightSite: RateLimiterAbstract,
    private readonly countAddress: RateLimiterAbstract,
    private readonly bytesAddress: RateLimiterAbstract,
    private readonly bytesSite: RateLimiterAbstract,
  ) {}

  static async create(store: RateStore, limits: WidgetWorkLimits = WIDGET_WORK_LIMITS): Promise<WidgetWorkQuota> {
    return new WidgetWorkQuota(
      limits,
      await flexibleLimiter(store, 'widget_files_in_flight_address', limits.inFlightPerAddress, LEASE_SECONDS),
      await flexibleLimiter(store, 'widget_files_in_flight_site', limits.inFlightPerSite, LEASE_SECONDS),
      await flexibleLimiter(store, 'widget_files_hour_address', limits.perAddressPerHour, 3600),
      await flexibleLimiter(store, 'widget_file_bytes_hour_address', limits.bytesPerAddressPerHour, 3600),
      await flexibleLimiter(store, 'widget_file_bytes_day_site', limits.bytesPerSitePerDay, 86_400),
    );
  }

  /**
   * Before a byte of the file is read: a place in flight for the address and for the
   * site, and one file of the address's hourly count. 429 `rate_limited` (Retry-After)
   * when any is used up; nothing is held then.
   */
  async admit(siteId: string, address: string): Promise<WorkLease> {
    const addressKey = `${siteId}:${address}`;
    const taken: Array<[RateLimiterAbstract, string]> = [];
    const giveBack = async () => {
      for (const [limiter, key] of taken.splice(0)) await limiter.reward(key, 1);
    };
    try {
      await this.take(this.inFlightAddress, addressKey, 1, taken, () =>
        rateLimited(`Too many files being processed from this address: at most ${this.limits.inFlightPerAddress} at once`, IN_FLIGHT_RETRY_SECONDS),
      );
      await this.take(this.inFlightSite, siteId, 1, taken, () =>
        rateLimited(`Too many files being processed for this site: at most ${this.limits.inFlightPerSite} at once`, IN_FLIGHT_RETRY_SECONDS),
      );
      // The hourly count is a budget: spent, not given back.
      await this.take(this.countAddress, addressKey, 1, [], (res) =>
        rateLimited(`Too many files from this address: at most ${this.limits.perAddressPerHour} an hour`, retryAfterOf(res)),
      );
    } catch (err) {
      await giveBack();
      throw err;
    }
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        await giveBack();
      },
    };
  }

  /** Once the file is read: its bytes against the address's hourly and the site's daily budget (429 when over either). */
  async chargeBytes(siteId: string, address: string, bytes: number): Promise<void> {
    if (bytes <= 0) return;
    const addressKey = `${siteId}:${address}`;
    const taken: Array<[RateLimiterAbstract, string]> = [];
    await this.take(this.bytesAddress, addressKey, bytes, taken, (res) =>
      rateLimited(`Too many bytes uploaded from this address: at most ${MB(this.limits.bytesPerAddressPerHour)} an hour`, retryAfterOf(res)),
    );
    try {
      await this.take(this.bytesSite, siteId, bytes, [], (res) =>
        rateLimited(`Too many bytes uploaded to this site: at most ${MB(this.limits.bytesPerSitePerDay)} a day`, retryAfterOf(res)),
      );
    } catch (err) {
      // Refused by the site's budget: the address did not get to spend its own.
      for (const [limiter, key] of taken) await limiter.reward(key, bytes);
      throw err;
    }
  }

  /** Consumes `points`; on refusal throws `refuse(res)` (and nothing is recorded as taken), else records what to give back. */
  private async take(limiter: RateLimiterAbstract, key: string, points: number, taken: Array<[RateLimiterAbstract, string]>, refuse: (res: RateLimiterRes) => DomainError): Promise<void> {
    try {
      await limiter.consume(key, points);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      // A refused consume still counted its points: give them back, so a refused request holds nothing.
      await limiter.reward(key, points);
      throw refuse(err);
    }
    taken.push([limiter, key]);
  }
}
