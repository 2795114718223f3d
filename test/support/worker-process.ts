import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { ALL_SEARCH_ATTRIBUTES, ensureSearchAttributes } from '../../worker/namespace-attributes';
import { LOG_LEVEL, testLogFile } from './secret-log';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The production worker entry (worker/main.ts) as a real child process, on a Temporal
 * namespace of its own: the worker creates the service's schedules at boot, which must
 * not collide with other test files on the shared dev server.
 */
export class WorkerProcesses {
  private readonly children: ChildProcess[] = [];
  private readonly outputs = new Map<ChildProcess, string>();

  constructor(
    readonly namespace: string,
    private readonly env: Record<string, string>,
  ) {}

  /**
   * Registers the namespace with the Concierge* search attributes, and waits until the server accepts them: the
   * dev server runs without refreshing its search-attribute cache on every read (dev/embedded/temporal.ts
   * devServerFlags), so attributes added at run time are refused for a few seconds.
   */
  async registerNamespace(): Promise<void> {
    const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
    try {
      await connection.workflowService.registerNamespace({
        namespace: this.namespace,
        // protobufjs accepts a plain number where the type says Long.
        workflowExecutionRetentionPeriod: { seconds: 86_400 as never },
      });
      await ensureSearchAttributes(connection, this.namespace);
      const client = new Client({ connection, namespace: this.namespace });
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          await client.workflow.count(ALL_SEARCH_ATTRIBUTES.map((k) => `${k.name} = ${k.type === SearchAttributeType.INT ? '0' : "'probe'"}`).join(' and '));
          break;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    } finally {
      await connection.close();
    }
  }

  /**
   * Starts a worker and resolves once it polls: from source through tsx (with the run's prebuilt workflow
   * bundle), or the compiled entry of `npm run build` (`dist/worker/main.js`, with its own), which Node runs with
   * no loader.
   */
  start(entry: 'source' | 'compiled' = 'source'): Promise<ChildProcess> {
    const args = entry === 'compiled' ? ['dist/worker/main.js'] : ['--import', 'tsx', 'worker/main.ts'];
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
        TEMPORAL_NAMESPACE: this.namespace,
        TEMPORAL_TASK_QUEUE: this.namespace,
        // Info into the run's log files, which are scanned for secrets (secret-log.ts).
        LOG_LEVEL: LOG_LEVEL,
        // The run's bundle (global-setup.ts), as a deploy hands its build's bundle to the worker: a worker from
        // source would otherwise spend seconds of CPU bundling the same code at every start.
        ...(entry === 'source' ? { TEMPORAL_WORKFLOW_BUNDLE: process.env.TEST_WORKFLOW_BUNDLE } : {}),
        ...this.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.children.push(child);
    const logFile = testLogFile(`worker-${child.pid}`);
    const log = logFile ? fs.createWriteStream(logFile, { flags: 'a' }) : null;
    child.once('close', () => log?.end());
    let output = '';
    let ready = false;
    return new Promise((resolve, reject) => {
      const onData = (d: Buffer) => {
        log?.write(d);
        // Only the start-up lines are kept in memory; the rest goes to the log file.
        if (ready) return;
        output += d.toString();
        this.outputs.set(child, output);
        // The line after "worker polling" says which workflow code it loaded.
        if (/worker polling[^\n]*\n[^\n]*workflows: [^\n]*\n/.test(output)) {
          ready = true;
          resolve(child);
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`worker exited (${code}) before it was ready:\n${output}`)));
    });
  }

  /** What the child printed so far (stdout and stderr). */
  output(child: ChildProcess): string {
    return this.outputs.get(child) ?? '';
  }

  /**
   * SIGKILLs a worker. With `fail` (the crash tests' default) the server then learns at once that the attempts
   * the dead worker had started are lost, which it would otherwise learn only at their heartbeat or start-to-close
   * timeout (10 to 30 s, workflows/presets.ts), and, for their workflows, at the sticky queue's timeout (the next
   * workflow task waits 10 s for the dead worker's cache before any worker may take it): each started attempt is
   * failed with the heartbeat timeout failure the server itself would record, so the activity's retry policy
   * schedules the next attempt as after the timeout, and each open workflow's sticky queue is reset
   * (ResetStickyTaskQueue, as a worker does when it evicts a workflow). What the crash tests assert — a new worker
   * finishes the work exactly once — is unchanged; only the waits for the timeouts are gone.
   */
  async kill(child: ChildProcess, opts: { fail?: boolean } = {}): Promise<void> {
    if (exited(child)) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    if (opts.fail ?? true) await this.failStartedActivities();
  }

  /** Times out, at once, every started activity attempt of the namespace's open workflows, and frees their sticky queues (see kill). */
  async failStartedActivities(): Promise<void> {
    const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
    try {
      const service = connection.workflowService;
      const client = new Client({ connection, namespace: this.namespace });
      for await (const wf of client.workflow.list({ query: 'ExecutionStatus = "Running"' })) {
        const execution = { workflowId: wf.workflowId, runId: wf.runId };
        await service.resetStickyTaskQueue({ namespace: this.namespace, execution });
        const d = await service.describeWorkflowExecution({ namespace: this.namespace, execution });
        for (const a of d.pendingActivities ?? []) {
          if (a.state !== temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED) continue;
          await service
            .respondActivityTaskFailedById({
              namespace: this.namespace,
              workflowId: wf.workflowId,
              runId: wf.runId,
              activityId: a.activityId!,
              identity: 'crash-test',
              // As the server's own heartbeat timeout reads: a workflow that tells a lost worker from a failure sees one.
              failure: { message: 'activity Heartbeat timeout', timeoutFailureInfo: { timeoutType: temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_HEARTBEAT } },
            })
            // The attempt ended on its own meanwhile: nothing to fail.
            .catch((err: { code?: number }) => {
              if (err.code !== 5 /* NOT_FOUND */) throw err;
            });
        }
      }
    } finally {
      await connection.close();
    }
  }

  async stopAll(): Promise<void> {
    for (const c of this.children) await this.kill(c, { fail: false });
  }
}

const exited = (c: ChildProcess) => c.exitCode !== null || c.signalCode !== null;

/** Polls `check` until it returns a value, or fails after `ms`. */
export async function eventually<T>(ms: number, what: string, check: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
