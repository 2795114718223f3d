import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { HISTORIES_DIR, installQuietRuntime } from '../support/temporal';
import { LOCAL_DB_STEPS_PATCH } from '../../workflows/short-steps';
import { OUTCOME_ATTRIBUTE_PATCH } from '../../workflows/outcome';
import { WEBHOOK_WAITS_PATCH } from '../../workflows/webhook-delivery';
import { serviceCodec, temporalDataConverter } from '../../lib/crypto/payload-codec';
import { SecretBox } from '../../lib/crypto/secret-box';

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

  // Runs recorded before LOCAL_DB_STEPS_PATCH ran their short database steps as activities; runs since, as local
  // activities behind the patch marker. Both kinds are kept and replayed, so the old branch stays replayable.
  test.each([
    ['messageSendWorkflow', 'recordMessage'],
    ['msgappInboundWorkflow', 'resolveInboundParty'],
    ['kbIndexWorkflow', 'beginIndexing'],
    ['conversationWorkflow', 'recordTaskStarted'],
    ['webhookDeliveryWorkflow', 'recordWebhookOutcome'],
  ])('%s has a history from before the local-db-steps patch (%s an activity) and one after it', (type, step) => {
    type Event = { activityTaskScheduledEventAttributes?: { activityType: { name: string } }; markerRecordedEventAttributes?: { markerName: string; details?: Record<string, { payloads: Array<{ data: string }> }> } };
    const ofType = histories.map(load).filter((h) => h.events[0].workflowExecutionStartedEventAttributes.workflowType.name === type) as Array<{ events: Event[] }>;
    const patch = (e: Event) => e.markerRecordedEventAttributes?.markerName === 'core_patch' && JSON.parse(Buffer.from(e.markerRecordedEventAttributes.details!['patch-data'].payloads[0].data, 'base64').toString()).id === LOCAL_DB_STEPS_PATCH;
    const before = ofType.filter((h) => h.events.some((e) => e.activityTaskScheduledEventAttributes?.activityType.name === step) && !h.events.some(patch));
    const after = ofType.filter((h) => h.events.some(patch) && h.events.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity'));
    expect(before.length).toBeGreaterThan(0);
    expect(after.length).toBeGreaterThan(0);
  });

  // Runs begun before WEBHOOK_WAITS_PATCH closed when exhausted and logged failed POSTs as completed activities; runs
  // since wait for a retry and fail the activity. Both kinds are kept and replayed.
  test('webhookDeliveryWorkflow has histories from before the webhook-failed-waits patch and one after it', () => {
    type Event = { markerRecordedEventAttributes?: { markerName: string; details?: Record<string, { payloads: Array<{ data: string }> }> }; activityTaskFailedEventAttributes?: unknown };
    const ofType = histories.map(load).filter((h) => h.events[0].workflowExecutionStartedEventAttributes.workflowType.name === 'webhookDeliveryWorkflow') as Array<{ events: Event[] }>;
    const patch = (e: Event) => e.markerRecordedEventAttributes?.markerName === 'core_patch' && JSON.parse(Buffer.from(e.markerRecordedEventAttributes.details!['patch-data'].payloads[0].data, 'base64').toString()).id === WEBHOOK_WAITS_PATCH;
    expect(ofType.filter((h) => !h.events.some(patch)).length).toBeGreaterThan(0);
    expect(ofType.filter((h) => h.events.some(patch) && h.events.some((e) => e.activityTaskFailedEventAttributes)).length).toBeGreaterThan(0);
  });

  // Runs recorded before OUTCOME_ATTRIBUTE_PATCH never upserted ConciergeOutcome; runs since do, behind the marker.
  test.each(['messageSendWorkflow', 'kbIndexWorkflow', 'structuredExtractionWorkflow', 'widgetUploadWorkflow', 'transcribeWorkflow', 'voiceSessionWorkflow', 'callWorkflow'])(
    '%s has a history from before the outcome-attribute patch and one after it that upserts ConciergeOutcome',
    (type) => {
      type Event = { upsertWorkflowSearchAttributesEventAttributes?: { searchAttributes: { indexedFields: Record<string, unknown> } }; markerRecordedEventAttributes?: { markerName: string; details?: Record<string, { payloads: Array<{ data: string }> }> } };
      const ofType = histories.map(load).filter((h) => h.events[0].workflowExecutionStartedEventAttributes.workflowType.name === type) as Array<{ events: Event[] }>;
      const patch = (e: Event) => e.markerRecordedEventAttributes?.markerName === 'core_patch' && JSON.parse(Buffer.from(e.markerRecordedEventAttributes.details!['patch-data'].payloads[0].data, 'base64').toString()).id === OUTCOME_ATTRIBUTE_PATCH;
      const upserts = (h: { events: Event[] }) => h.events.some((e) => e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes.indexedFields.ConciergeOutcome);
      expect(ofType.filter((h) => !h.events.some(patch) && !upserts(h)).length).toBeGreaterThan(0);
      expect(ofType.filter((h) => h.events.some(patch) && upserts(h)).length).toBeGreaterThan(0);
    },
  );

  // With the service's data converter, as the worker and `npm run replay` run: the fixtures' unencrypted payloads pass through.
  const dataConverter = temporalDataConverter(serviceCodec(new SecretBox(randomBytes(32)), 1));
  test.each(histories)('%s replays deterministically', async (file) => {
    const bundle = process.env.TEST_WORKFLOW_BUNDLE!;
    await expect(Worker.runReplayHistory({ workflowBundle: { codePath: bundle }, dataConverter }, load(file), file)).resolves.toBeUndefined();
  });

  test('an incompatible change to a workflow is caught as a DeterminismViolationError', async () => {
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./fixtures/changed-maintenance'), logger: quiet });
    const replay = Worker.runReplayHistory({ workflowBundle: { code } }, load('purge-expired.json'), 'purge-expired');
    await expect(replay).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
