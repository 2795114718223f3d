import fs from 'node:fs';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { scanLogs } from './secret-log';
import type { TestServices } from './services';
import { adminQuery, TEST_PG_URL } from './db';

export default async function globalTeardown(): Promise<void> {
  const g = globalThis as Record<string, unknown>;
  await (g.__TEMPORAL_ENV__ as TestWorkflowEnvironment | undefined)?.teardown();
  if (g.__TEST_TEMPLATE_DB__) await adminQuery(TEST_PG_URL, `drop database if exists "${g.__TEST_TEMPLATE_DB__ as string}" with (force)`).catch(() => undefined);
  await (g.__TEST_SERVICES__ as TestServices | undefined)?.stop();
  const logDir = process.env.TEST_LOG_DIR;
  const findings = logDir ? scanLogs(logDir) : [];
  if (findings.length) {
    // The logs stay for inspection; the message names the file and the kind, never the secret.
    throw new Error(
      `Secrets never leave: a secret of the run was found in its logs (kept in ${logDir}):\n${findings.map((f) => `  ${f.file}: a ${f.kind}`).join('\n')}`,
    );
  }
  if (g.__TEST_TMP__) fs.rmSync(g.__TEST_TMP__ as string, { recursive: true, force: true });
}
