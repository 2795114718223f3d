/**
 * Closes a test file's parts in order, each given at most `ms`: a part that does not
 * finish in time is named on the console (so the cause can be found) and left behind,
 * and the next one still closes. The tests have run by then; a slow close must not fail
 * the file, nor hide which part was slow.
 */
/** A part that takes longer than this to close is named on the console even when it closes in time. */
const SLOW_MS = 5_000;

export async function closeInOrder(steps: Array<[name: string, close: (() => Promise<unknown> | unknown) | undefined]>, ms = 15_000): Promise<void> {
  for (const [name, close] of steps) {
    if (!close) continue;
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
    const outcome = await Promise.race([Promise.resolve().then(close).then(() => 'done' as const), late]).catch((err: unknown) => {
      console.warn(`teardown: ${name} failed: ${(err as Error).message}`);
      return 'failed' as const;
    });
    clearTimeout(timer);
    if (outcome === 'late') console.warn(`teardown: ${name} did not close within ${ms} ms; left behind`);
    else if (process.env.DEBUG_SHUTDOWN || Date.now() - started > SLOW_MS) console.warn(`teardown: ${name} closed in ${Date.now() - started} ms`);
  }
}
