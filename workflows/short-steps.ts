import { patched, proxyActivities, proxyLocalActivities, type ActivityOptions, type LocalActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';

/**
 * The patch that turned the short database steps (record a message, mark it sent,
 * begin/finish indexing, a task's row…) from activities into local activities. Runs
 * begun before it keep their activities when replayed (their histories hold activity
 * events, not markers); every new run, and a running one from its next workflow task
 * on, takes the local branch and records the patch marker. Retire it with
 * `deprecatePatch` once no run recorded before it can be replayed, then remove it.
 */
export const LOCAL_DB_STEPS_PATCH = 'local-db-steps';

type Step<K extends keyof Activities> = (summary: string, args: Parameters<Activities[K]>) => Promise<Awaited<ReturnType<Activities[K]>>>;

/**
 * Short database steps as this run takes them: local activities with `local` (see
 * LOCAL_DB_STEPS_PATCH), activities with `remote` in runs recorded before the patch.
 * The branch is decided at each call, where the step's command would be emitted.
 */
export function shortSteps<K extends keyof Activities>(names: readonly K[], remote: ActivityOptions, local: LocalActivityOptions): { [N in K]: Step<N> } {
  type Proxy = Record<K, { executeWithOptions(options: ActivityOptions | LocalActivityOptions, args: unknown[]): Promise<unknown> }>;
  const viaServer = proxyActivities<Activities>(remote) as unknown as Proxy;
  const viaWorker = proxyLocalActivities<Activities>(local) as unknown as Proxy;
  const steps = {} as { [N in K]: Step<N> };
  for (const name of names) {
    steps[name] = ((summary, args) =>
      patched(LOCAL_DB_STEPS_PATCH)
        ? viaWorker[name].executeWithOptions({ ...local, summary }, args)
        : viaServer[name].executeWithOptions({ ...remote, summary }, args)) as Step<typeof name>;
  }
  return steps;
}
