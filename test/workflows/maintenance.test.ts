import { ScheduleNotFoundError } from '@temporalio/client';
import { purgeExpiredWorkflow } from '../../workflows';
import { ensureSchedules, PURGE_SCHEDULE_ID, RECONCILE_SCHEDULE_ID } from '../../worker/schedules';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createWorkspace } from '../support/app';
import { maybeRecordHistory, startTestWorker } from '../support/temporal';

let db: TestDatabase;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let ws: string;

beforeAll(async () => {
  db = await createTestDatabase();
  tw = await startTestWorker(db);
  ws = await createWorkspace(db.orm);
});
afterAll(async () => {
  for (const id of [PURGE_SCHEDULE_ID, RECONCILE_SCHEDULE_ID]) {
    await tw.client.schedule.getHandle(id).delete().catch((err) => {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    });
  }
  await tw.close();
  await db.drop();
});

async function seedKeys(expired: number, live: number): Promise<void> {
  const em = db.orm.em.fork();
  for (let i = 0; i < expired + live; i++) {
    await em.execute(
      `insert into idempotency_keys (workspace_id, key, request_hash, state, response_status, response_body, expires_at)
       values (?, ?, 'h', 'completed', 201, '{}', now() + (? * interval '1 hour'))`,
      [ws, `seed-${Date.now()}-${i}`, i < expired ? -1 : 24],
    );
  }
}
const keyCount = async () => Number((await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from idempotency_keys'))[0].n);

describe('maintenance: purge expired data through Temporal', () => {
  test('the workflow runs its activities on the real server and deletes only expired keys', async () => {
    await seedKeys(3, 2);
    const workflowId = `${PURGE_SCHEDULE_ID}:${tw.taskQueue}`;
    const result = await tw.client.workflow.execute(purgeExpiredWorkflow, { workflowId, taskQueue: tw.taskQueue });
    expect(result).toEqual({ idempotencyKeys: 3, rateLimitWindows: 0 });
    expect(await keyCount()).toBe(2);
    await maybeRecordHistory(tw.client, workflowId, 'purge-expired');
  });

  test('the service’s schedule exists after boot and starts the workflow, whose id names its schedule', async () => {
    await ensureSchedules(tw.client, tw.taskQueue);
    await ensureSchedules(tw.client, tw.taskQueue); // idempotent: a second worker boot is fine
    const handle = tw.client.schedule.getHandle(PURGE_SCHEDULE_ID);
    const described = await handle.describe();
    expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'purgeExpiredWorkflow', taskQueue: tw.taskQueue });
    expect(described.spec.intervals?.[0]?.every).toBe(3_600_000);
    // The reconciliation of records stranded by terminate: every 5 minutes.
    const reconcile = await tw.client.schedule.getHandle(RECONCILE_SCHEDULE_ID).describe();
    expect(reconcile.action).toMatchObject({ type: 'startWorkflow', workflowType: 'reconcileStrandedWorkflow', taskQueue: tw.taskQueue });
    expect(reconcile.spec.intervals?.[0]?.every).toBe(300_000);

    await seedKeys(2, 0);
    await handle.trigger();
    const deadline = Date.now() + 20_000;
    let runs = (await handle.describe()).info.recentActions;
    while (runs.length === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      runs = (await handle.describe()).info.recentActions;
    }
    expect(runs.length).toBeGreaterThan(0);
    const started = runs[0].action.workflow;
    expect(started.workflowId.startsWith(PURGE_SCHEDULE_ID)).toBe(true);
    const outcome = await tw.client.workflow.getHandle(started.workflowId, started.firstExecutionRunId).result();
    expect(outcome.idempotencyKeys).toBe(2);
    expect(await keyCount()).toBe(2);
  });
});

test('a schedule created for another task queue is pointed at the current one', async () => {
  await ensureSchedules(tw.client, 'some-old-queue');
  await ensureSchedules(tw.client, tw.taskQueue);
  const described = await tw.client.schedule.getHandle(PURGE_SCHEDULE_ID).describe();
  expect(described.action).toMatchObject({ taskQueue: tw.taskQueue });
});
