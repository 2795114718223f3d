import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { findWheelBinary } from '../../dev/embedded/temporal';
import { isListening, pickPort, waitFor } from '../../dev/embedded/ports';

/** moto accepts any credentials; these are what the tests' clients present. */
export const MOTO_CREDENTIALS = { accessKeyId: 'concierge-test', secretAccessKey: 'concierge-test-secret' };

export interface MotoServer {
  endpoint: string;
  /** A client of this server (path-style, the test credentials); destroyed by stop(). */
  client: S3Client;
  createBucket(name: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A real S3-compatible server: moto's `moto_server` (PyPI `moto[server]`, found by absolute
 * path in the interpreter's scripts directory, installed when missing) on a free loopback
 * port, its output in the run's log directory.
 */
export async function startMoto(): Promise<MotoServer> {
  const exe = findWheelBinary('moto_server', 'moto[server]', { explicit: process.env.MOTO_SERVER_PATH, install: true });
  const host = '127.0.0.1';
  const port = await pickPort(host, 0);
  const logDir = process.env.TEST_LOG_DIR;
  const out = logDir ? fs.openSync(path.join(logDir, `moto-${process.pid}-${port}.log`), 'a') : 'ignore';
  const child = spawn(exe, ['-H', host, '-p', String(port)], { stdio: ['ignore', out, out] });
  let exited = false;
  child.once('exit', () => (exited = true));
  await waitFor(async () => {
    if (exited) throw new Error('moto_server exited early');
    return isListening(host, port);
  }, 30_000, `moto_server on ${host}:${port}`);
  const endpoint = `http://${host}:${port}`;
  const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: MOTO_CREDENTIALS });
  return {
    endpoint,
    client,
    createBucket: async (name) => {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    stop: () =>
      new Promise<void>((resolve) => {
        client.destroy();
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      }),
  };
}
