import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';

export interface WorkerParams {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** A prebuilt bundle (tests build one per run); otherwise the workflows are bundled at start. */
  workflowBundle?: { codePath: string };
  options?: Partial<WorkerOptions>;
}

export const WORKFLOWS_PATH = require.resolve('../workflows');

export async function createWorker(p: WorkerParams): Promise<Worker> {
  return Worker.create({
    connection: p.connection,
    namespace: p.namespace,
    taskQueue: p.taskQueue,
    activities: createActivities(p.deps),
    ...(p.workflowBundle ? { workflowBundle: p.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    ...p.options,
  });
}
