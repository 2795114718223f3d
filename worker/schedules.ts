import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';

export const PURGE_SCHEDULE_ID = 'maintenance:purge-expired';
export const RECONCILE_SCHEDULE_ID = 'maintenance:reconcile';

/** The service's schedules; their workflows belong to no workspace (no ConciergeWorkspaceId). */
function schedules(taskQueue: string): ScheduleOptions[] {
  return [
    {
      scheduleId: PURGE_SCHEDULE_ID,
      spec: { intervals: [{ every: '1 hour' }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 hour' },
      action: {
        type: 'startWorkflow',
        workflowType: 'purgeExpiredWorkflow',
        workflowId: PURGE_SCHEDULE_ID,
        taskQueue,
        args: [],
        staticSummary: 'purge expired Idempotency-Key responses and rate-limit windows',
      },
    },
    {
      // Every 5 minutes: a record stranded by `terminate` (which runs no code) is settled within minutes.
      scheduleId: RECONCILE_SCHEDULE_ID,
      spec: { intervals: [{ every: '5 minutes' }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '5 minutes' },
      action: {
        type: 'startWorkflow',
        workflowType: 'reconcileStrandedWorkflow',
        workflowId: RECONCILE_SCHEDULE_ID,
        taskQueue,
        args: [],
        staticSummary: 'settle records whose workflow ended without settling them (terminated)',
      },
    },
  ];
}

/**
 * Creates the service's Temporal schedules when missing, and points an existing one at
 * this worker's task queue if it names another (a renamed queue must not strand it).
 * Safe to call from every worker at boot.
 */
export async function ensureSchedules(client: Client, taskQueue: string): Promise<void> {
  for (const options of schedules(taskQueue)) {
    try {
      await client.schedule.create(options);
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      const handle = client.schedule.getHandle(options.scheduleId);
      const current = await handle.describe();
      if (current.action.type === 'startWorkflow' && current.action.taskQueue !== taskQueue) {
        await handle.update((prev) => ({ ...prev, action: { ...prev.action, taskQueue } as typeof prev.action }));
      }
    }
  }
}
