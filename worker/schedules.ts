import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';

export const PURGE_SCHEDULE_ID = 'maintenance:purge-expired';

/**
 * Creates the service's Temporal schedules when missing, and points an existing one at
 * this worker's task queue if it names another (a renamed queue must not strand it).
 * Safe to call from every worker at boot.
 */
export async function ensureSchedules(client: Client, taskQueue: string): Promise<void> {
  try {
    await client.schedule.create({
      scheduleId: PURGE_SCHEDULE_ID,
      spec: { intervals: [{ every: '1 hour' }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 hour' },
      action: { type: 'startWorkflow', workflowType: 'purgeExpiredWorkflow', workflowId: PURGE_SCHEDULE_ID, taskQueue, args: [] },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    const handle = client.schedule.getHandle(PURGE_SCHEDULE_ID);
    const current = await handle.describe();
    if (current.action.type === 'startWorkflow' && current.action.taskQueue !== taskQueue) {
      await handle.update((prev) => ({ ...prev, action: { ...prev.action, taskQueue } as typeof prev.action }));
    }
  }
}
