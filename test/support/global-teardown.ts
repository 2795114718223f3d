import fs from 'node:fs';
import type { TestWorkflowEnvironment } from '@temporalio/testing';

export default async function globalTeardown(): Promise<void> {
  const g = globalThis as Record<string, unknown>;
  await (g.__TEMPORAL_ENV__ as TestWorkflowEnvironment | undefined)?.teardown();
  if (g.__TEST_TMP__) fs.rmSync(g.__TEST_TMP__ as string, { recursive: true, force: true });
}
