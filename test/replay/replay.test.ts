import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { HISTORIES_DIR, installQuietRuntime } from '../support/temporal';

const histories = fs.readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json'));
const load = (file: string) => JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8'));
const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} };

beforeAll(() => installQuietRuntime());

describe('stored workflow histories replay against the current code', () => {
  test('there is a stored history for every workflow type', () => {
    const types = new Set(histories.map((f) => load(f).events[0].workflowExecutionStartedEventAttributes.workflowType.name));
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const exported = Object.keys(require('../../workflows'));
    expect([...types].sort()).toEqual(exported.sort());
  });

  test.each(histories)('%s replays deterministically', async (file) => {
    const bundle = process.env.TEST_WORKFLOW_BUNDLE!;
    await expect(Worker.runReplayHistory({ workflowBundle: { codePath: bundle } }, load(file), file)).resolves.toBeUndefined();
  });

  test('an incompatible change to a workflow is caught as a DeterminismViolationError', async () => {
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./fixtures/changed-maintenance'), logger: quiet });
    const replay = Worker.runReplayHistory({ workflowBundle: { code } }, load('purge-expired.json'), 'purge-expired');
    await expect(replay).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
