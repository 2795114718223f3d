import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { ensureSearchAttributes } from '../../worker/search-attributes';
import type { Cleanup } from './child';

/** A worker's and a client's connections to a running Temporal server, search attributes registered; closed by `cleanup`. */
export async function connectTemporal(address: string, namespace: string, cleanup: Cleanup): Promise<{ nativeConnection: NativeConnection; connection: Connection; client: Client }> {
  const nativeConnection = await NativeConnection.connect({ address });
  cleanup.push(['worker connection', () => nativeConnection.close()]);
  const connection = await Connection.connect({ address });
  cleanup.push(['client connection', () => connection.close()]);
  const client = new Client({ connection, namespace });
  await ensureSearchAttributes(connection, namespace);
  return { nativeConnection, connection, client };
}

/** Runs a worker until `cleanup` shuts it down. */
export function runWorker(worker: Worker, cleanup: Cleanup): Promise<void> {
  const running = worker.run();
  cleanup.push([
    'worker',
    async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  ]);
  return running;
}
