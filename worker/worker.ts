import fs from 'node:fs';
import path from 'node:path';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';

export interface WorkerParams {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** The composition's (lib/crypto/payload-codec.ts): what the worker writes into histories is encrypted. */
  dataConverter: DataConverter;
  /**
   * A prebuilt bundle (tests build one per run). Absent: the one `npm run build` wrote
   * beside the compiled code, or, running from source, the workflows bundled at start.
   */
  workflowBundle?: { codePath: string };
  options?: Partial<WorkerOptions>;
}

export const WORKFLOWS_PATH = require.resolve('../workflows');

/** Where `npm run build` writes the workflow bundle: dist/workflow-bundle.js, beside dist/worker. */
export const PREBUILT_BUNDLE_PATH = path.join(__dirname, '..', 'workflow-bundle.js');

/**
 * The bundle a worker loads: the one given (a test run's, or TEMPORAL_WORKFLOW_BUNDLE), else the prebuilt one of a
 * compiled build, else none.
 */
export function workflowBundleFor(given?: { codePath: string }): { codePath: string } | undefined {
  if (given) {
    if (!fs.existsSync(given.codePath)) throw new Error(`workflow bundle ${given.codePath} does not exist (TEMPORAL_WORKFLOW_BUNDLE)`);
    return given;
  }
  // Only a compiled tree has one: from source (tsx) __dirname is worker/, and no bundle sits at the repo root.
  return path.extname(__filename) === '.js' && fs.existsSync(PREBUILT_BUNDLE_PATH) ? { codePath: PREBUILT_BUNDLE_PATH } : undefined;
}

/**
 * Workflow-task slots: an eager start (app/temporal-clients/index.ts) is handed to this worker only
 * while a slot is free, so there are plenty; a workflow task is short (its short database
 * steps run as local activities in it), so idle slots cost nothing. The workflow cache
 * and the reused V8 context stay at their defaults: a cached run's next task (an
 * activity's result, a visitor's update) skips replay.
 */
export const WORKFLOW_TASK_SLOTS = 200;

/**
 * Stopping never hangs: activities get their cancellation after the grace time, and the
 * worker gives up waiting after the force time (what is still running is retried by
 * Temporal on another worker, as after a crash). A deploy or a test's teardown is bounded.
 */
export const SHUTDOWN_GRACE = '5 seconds';
export const SHUTDOWN_FORCE = '20 seconds';
export const HEARTBEAT_THROTTLE = '2 seconds';

export async function createWorker(p: WorkerParams): Promise<Worker> {
  const bundle = workflowBundleFor(p.workflowBundle);
  return Worker.create({
    connection: p.connection,
    namespace: p.namespace,
    taskQueue: p.taskQueue,
    activities: createActivities(p.deps),
    dataConverter: p.dataConverter,
    maxConcurrentWorkflowTaskExecutions: WORKFLOW_TASK_SLOTS,
    shutdownGraceTime: SHUTDOWN_GRACE,
    shutdownForceTime: SHUTDOWN_FORCE,
    // A cancellation reaches a running activity with the answer to its next heartbeat, and
    // the SDK sends at most one every 0.8 × heartbeatTimeout by default (12 s for a call):
    // a hang-up, a stop or a cancelled job should land within seconds.
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
    ...(bundle ? { workflowBundle: bundle } : { workflowsPath: WORKFLOWS_PATH }),
    ...p.options,
  });
}
