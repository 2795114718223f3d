import { CancellationScope, isCancellation } from '@temporalio/workflow';

/**
 * Whether `err` is this workflow being cancelled (an operator's `temporal workflow cancel`,
 * the UI's Cancel, or a parent's cancel): the record must still leave its in-between
 * state, so the caller writes its outcome with `recordCancelled` and rethrows.
 */
export const cancelled = (err: unknown): boolean => isCancellation(err) && CancellationScope.current().consideredCancelled;

/**
 * Writes the outcome of a cancelled run in a scope the cancellation cannot reach (a
 * cancelled scope would cancel the bookkeeping activity before it starts), so the API
 * never shows the record pending or processing for ever; the caller then rethrows, and
 * the run ends as Canceled in the UI.
 */
export function recordCancelled(record: () => Promise<unknown>): Promise<unknown> {
  return CancellationScope.nonCancellable(record);
}
