import { ApplicationFailure, Context } from '@temporalio/activity';
import { OperationalError } from '../lib/failures';

/**
 * Longest Retry-After an activity honours before its next attempt: the one activity whose
 * errors carry one today is the chat turn, and a visitor is waiting on it.
 */
const MAX_RETRY_AFTER_MS = 30_000;

/**
 * What an activity's error becomes for Temporal. An OperationalError (lib/failures.ts)
 * says itself what it is: its code is the failure type, `retryable: false` makes it final
 * whatever the workflow's retry policy, and a Retry-After hint (capped) sets the next
 * attempt's delay. Anything else is a bug or an outage: thrown as it is, retried by policy.
 */
export function toFailure(err: unknown): unknown {
  if (!(err instanceof OperationalError)) return err;
  return ApplicationFailure.create({
    type: err.code,
    message: err.message,
    nonRetryable: !err.retryable,
    ...(err.retryable && err.retryAfterMs !== undefined ? { nextRetryDelay: Math.min(err.retryAfterMs, MAX_RETRY_AFTER_MS) } : {}),
  });
}

type AnyActivity = (...args: any[]) => Promise<unknown>;

/** The same activities, each throwing `toFailure(err)`: the one place errors are turned into failures. */
export function withFailures<T extends Record<string, AnyActivity>>(activities: T): T {
  const wrapped: Record<string, AnyActivity> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        throw toFailure(err);
      }
    };
  }
  return wrapped as T;
}

/** Heartbeats every few seconds while `work` runs (extraction waits on a child process, a turn on the model). */
export async function withHeartbeat<T>(work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => Context.current().heartbeat(), 5_000);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
