// Diagnostic, not a bench section: how many workflows per second the local Temporal dev
// server and one worker complete for workflows shaped like webhookDeliveryWorkflow but
// with no-op activities, and with local activities instead. Shows the ceiling the
// Temporal side puts on webhook deliveries on this machine, whatever the code around it.
//
//   node --import tsx bench/tools/temporal-ceiling.ts [count=300] [startConcurrency=20] [file|memory]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, makeTelemetryFilterString, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { findTemporalCli, startDevServer } from '../../infra/temporal';
import { cpuBetween, cpuSnapshot, descendantNamed, formatCpu } from '../lib/cpu';
import { ceilingActivities } from './ceiling/activities';

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? 300);
  const concurrency = Number(process.argv[3] ?? 20);
  const store = process.argv[4] === 'memory' ? 'memory' : 'file';
  Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-ceiling-'));
  const cli = findTemporalCli({ explicit: process.env.TEMPORAL_CLI_PATH, install: true });
  let address: string;
  let pid: number | undefined;
  let stop: () => Promise<void>;
  if (store === 'file') {
    const dev = await startDevServer({ cli, dbFile: path.join(tmp, 'temporal.db'), port: 0, uiPort: 0, namespace: 'default', logFile: path.join(tmp, 'log') });
    address = dev.address;
    pid = dev.process.pid;
    stop = () => dev.stop();
  } else {
    const env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: cli }, ip: '127.0.0.1', log: { format: 'pretty', level: 'error' } } });
    address = env.address;
    pid = descendantNamed(process.pid, 'temporal');
    stop = () => env.teardown();
  }
  const native = await NativeConnection.connect({ address });
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const worker = await Worker.create({
    connection: native,
    taskQueue: 'ceiling',
    workflowsPath: require.resolve('./ceiling/workflows'),
    activities: ceilingActivities,
  });
  const running = worker.run();
  try {
    for (const type of ['oneActivity', 'twoActivities', 'twoLocalActivities', 'twoActivities'] as const) {
      // A small warm-up of each type first.
      for (const [n, measured] of [[10, false], [count, true]] as const) {
        const c0 = cpuSnapshot({ pids: { temporal: pid }, names: { postgres: 'postgres' } });
        const t0 = performance.now();
        let next = 0;
        const results: Array<Promise<unknown>> = [];
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next < n) {
              const i = next++;
              const h = await client.workflow.start(type, { taskQueue: 'ceiling', workflowId: `${type}-${measured ? 'm' : 'w'}-${i}-${Date.now()}` });
              results.push(h.result());
            }
          }),
        );
        const started = performance.now();
        await Promise.all(results);
        const t1 = performance.now();
        const c1 = cpuSnapshot({ pids: { temporal: pid }, names: { postgres: 'postgres' } });
        if (!measured) continue;
        const cpu = cpuBetween(c0, c1, os.cpus().length);
        const secs = (t1 - t0) / 1000;
        console.log(
          `${type.padEnd(20)} ${n} workflows in ${secs.toFixed(2)} s = ${(n / secs).toFixed(0)}/s (all started after ${((started - t0) / 1000).toFixed(2)} s); ` +
            `temporal CPU ${(((cpu.cores.temporal ?? 0) * secs * 1000) / n).toFixed(1)} ms/workflow, node ${((cpu.cores.node * secs * 1000) / n).toFixed(1)} ms/workflow; ${formatCpu(cpu)}`,
        );
      }
    }
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await native.close();
    await stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

void main();
