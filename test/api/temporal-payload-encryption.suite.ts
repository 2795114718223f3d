// Workflow histories hold no plain customer text: payloads and failure messages are encrypted before Temporal sees them.
import { temporal } from '@temporalio/proto';
import { conversationWorkflowId } from '../../workflows/conversation';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { startTestWorker } from '../support/temporal';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let site: { site_id: string };
const ORIGIN = 'https://shop.example';
const VISITOR = 'my parcel to 42 Secret Lane, Springfield never arrived';
/** What the model's provider answers when it fails: the activity's failure message carries it. */
const PROVIDER_ERROR = 'quota exceeded for account Secret-Account-7781';

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({
    reply: (body: { messages: Array<{ role: string; content: string | null }> }) => {
      const last = [...body.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
      return last.includes('please fail') ? { status: 400, text: PROVIDER_ERROR } : { text: `About "${last}": it left the warehouse.` };
    },
  });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' } });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  site = await t.services.sites.create(ws, await publishedWebAgent(t.app, auth, ORIGIN), [ORIGIN]);
}, 60_000);
afterAll(async () => {
  await t.close();
  await tw.close();
  await llm.close();
  await db.drop();
});

const post = (url: string, payload: object) =>
  t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });

/** The history exactly as the server stores and serves it (no codec): every byte of it as text, and its events. */
async function rawHistory(workflowId: string) {
  const res = await tw.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId } });
  const events = res.history?.events ?? [];
  const bytes = Buffer.from(temporal.api.history.v1.History.encode({ events }).finish());
  return { events, text: bytes.toString('latin1') };
}

/** Every Failure in the history (failures and their causes), wherever an event carries one. */
function failures(value: unknown, out: temporal.api.failure.v1.IFailure[] = []): temporal.api.failure.v1.IFailure[] {
  if (!value || typeof value !== 'object' || ArrayBuffer.isView(value)) return out;
  for (const [k, v] of Object.entries(value)) {
    if ((k === 'failure' || k === 'cause') && v && typeof v === 'object') out.push(v as temporal.api.failure.v1.IFailure);
    failures(v, out);
  }
  return out;
}

/** Every payload (an object with metadata and data) in the history, with where it sits and its encoding. */
function payloadsIn(value: unknown, path = '', out: Array<{ path: string; encoding: string }> = []) {
  if (!value || typeof value !== 'object' || ArrayBuffer.isView(value)) return out;
  const p = value as { metadata?: Record<string, Uint8Array>; data?: unknown };
  if (p.metadata && typeof p.metadata === 'object' && 'data' in p) out.push({ path, encoding: Buffer.from(p.metadata.encoding ?? []).toString() });
  else for (const [k, v] of Object.entries(value)) payloadsIn(v, path ? `${path}.${k}` : k, out);
  return out;
}

test('a conversation started through the service client leaves no visitor text, reply or failure message in plain in its history', async () => {
  const conv = (await post('init', {})).json();
  const ok = await post('send', { conversation_id: conv.conversation_id, text: VISITOR });
  expect(ok.statusCode).toBe(200);
  expect(ok.json().text).toContain('Secret Lane');
  const failed = await post('send', { conversation_id: conv.conversation_id, text: 'please fail: 42 Secret Lane again' });
  expect(failed.statusCode).toBe(502);

  const { events, text } = await rawHistory(conversationWorkflowId(conv.conversation_id));
  expect(events.length).toBeGreaterThan(5);
  expect(text).not.toContain('Secret Lane');
  expect(text).not.toContain('Springfield');
  expect(text).not.toContain('Secret-Account-7781');
  expect(text).not.toContain('warehouse');
  // Failures are there, but their messages and stack traces sit in the encrypted encodedAttributes.
  const found = failures(events);
  expect(found.length).toBeGreaterThan(0);
  for (const f of found) {
    expect(f.message).toBe('Encoded failure');
    expect(f.stackTrace ?? '').toBe('');
    expect(Buffer.from(f.encodedAttributes?.metadata?.encoding ?? []).toString()).toBe('binary/encrypted');
  }
  // Decrypted with the service's codec, the failures do hold the provider's message.
  const attrs = await tw.composition.payloadCodec.decode(found.map((f) => f.encodedAttributes!));
  expect(attrs.map((a) => Buffer.from(a.data!).toString()).join('\n')).toContain('Secret-Account-7781');
  // Every payload is encrypted, except those the SDK core writes itself (patch and local-activity marker
  // bookkeeping) and the search attributes, which hold ids only.
  const plain = payloadsIn(events).filter((p) => p.encoding !== 'binary/encrypted').map((p) => p.path);
  expect(payloadsIn(events).filter((p) => p.encoding === 'binary/encrypted').length).toBeGreaterThan(5);
  for (const path of plain) expect(path).toMatch(/(searchAttributes|details\.patch-data|markerRecordedEventAttributes\.details\.data)\./);

  // The service's own client still reads it: the decoded history holds the text.
  const decoded = await tw.client.workflow.getHandle(conversationWorkflowId(conv.conversation_id)).fetchHistory();
  expect(decoded.events?.length).toBe(events.length);
}, 60_000);
