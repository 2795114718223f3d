/**
 * The one base of errors an operation reports about itself: a stable `code` (the failure
 * type Temporal records when an activity throws it, see activities/errors.ts `toFailure`)
 * and whether trying again may succeed. Decided where the error is thrown, never guessed
 * later from its message. `detail` is for logs only; the message may be shown to users.
 */
export class OperationalError extends Error {
  readonly detail?: string;

  constructor(
    readonly code: string,
    message: string,
    readonly retryable: boolean,
    opts: { detail?: string; retryAfterMs?: number } = {},
  ) {
    super(message);
    if (opts.detail) this.detail = opts.detail;
    if (opts.retryAfterMs !== undefined) this.retryAfterMs = opts.retryAfterMs;
  }

  /** How long the other side asked us to wait before the next attempt (a Retry-After). */
  readonly retryAfterMs?: number;
}
