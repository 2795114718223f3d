import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { SecretBox } from '../../lib/crypto/secret-box';
import { transcriberFromConfig } from '../../app/extractor';
import { voiceWorkflowId, type VoiceOutcome } from '../../workflows/voice';
import { bearer, createKey, createWorkspace, MODELS_DIR, publishedWebAgent, startTestApp, testBlobs, testConfig, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { LOCAL_ICE_CIDRS } from '../support/ice';
import { joinAsBrowser, speech8k } from '../../dev/fakes/voice-browser';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * A worker process killed mid-session (SIGKILL: no goodbye, no last flush): the media
 * activity's heartbeat times out (15 s), the `voice:` workflow ends with `worker_lost` on
 * the next worker, which saves the recordings from what was spooled, and the session's
 * row is ended. The browser does nothing after the kill.
 */
const ORIGIN = 'https://shop.example';
const KEY = randomBytes(32).toString('hex');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'voice-crash-'));
let db: TestDatabase;
let llm: FakeLlm;
let workers: WorkerProcesses;
let connection: Connection;
let t: TestApp;
let port: number;

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply: () => ({ text: 'We deliver within two days.' }) });
  workers = new WorkerProcesses(`voicecrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    // The spool's chunks are blobs: the second worker reads what the first one stored.
    CONCIERGE_STORAGE_DIR: testBlobs.root,
    CONCIERGE_MODELS_DIR: MODELS_DIR,
    LLM_BASE_URL: llm.url,
    LLM_MODEL: 'fake-model',
    // The test "browser" is a werift peer on this machine: its candidates are local addresses (test-only allowance).
    VOICE_ICE_ALLOW_CIDRS: LOCAL_ICE_CIDRS,
  });
  await workers.registerNamespace();
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  // The API only checks that speech-to-text exists here (voice prerequisites); the worker transcribes.
  const transcriber = transcriberFromConfig(testConfig());
  if (!transcriber) throw new Error('the whisper model is missing: npm run models:fetch');
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: new Client({ connection, namespace: workers.namespace }), taskQueue: workers.namespace },
    serviceOptions: { box: SecretBox.fromString(KEY), transcriber },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
}, 60_000);

afterAll(async () => {
  await workers?.stopAll();
  await t?.close();
  await connection?.close();
  await llm?.close();
  await db?.drop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a worker killed mid-session ends the session cleanly (worker_lost) and keeps the recording made so far', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
  const site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  await t.services.credits.grant(ws, 100);
  const headers = { 'x-concierge-site': site.site_id, origin: ORIGIN };

  const first = await workers.start();
  const start = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers, payload: {} });
  expect(start.statusCode).toBe(200);
  const session = start.json();
  const browser = await joinAsBrowser(session, port);
  browser.say(speech8k('Hello, I would like to know when my order will arrive, and whether you can deliver it to my office on Friday morning.', dir));

  // At least one 5 s chunk of the caller's track is in the spool, and ~8 s spoken, before the worker dies.
  const em = db.orm.em.fork();
  const joinedAt = Date.now();
  await eventually(20_000, 'a spooled chunk of the caller track', async () => (await em.execute(`select 1 from voice_recording_chunks where session_id = ? and track = 'caller'`, [session.voice_session_id])).length > 0);
  await new Promise((r) => setTimeout(r, Math.max(0, 8_000 - (Date.now() - joinedAt))));
  expect((await t.services.voice.session(ws, session.voice_session_id))!.status).toBe('live');
  await workers.kill(first);
  await workers.start();

  // The media activity is never retried: its heartbeat times out and the next worker finishes the session.
  const outcome = await t.composition.temporal!.client.workflow.getHandle(voiceWorkflowId(session.voice_session_id)).result() as VoiceOutcome;
  expect(outcome.reason).toBe('worker_lost');
  expect(outcome.recordings.map((r) => r.kind).sort()).toEqual(['agent', 'caller', 'combined']);
  for (const r of outcome.recordings) expect(r.duration_ms).toBeGreaterThanOrEqual(4_000);
  const row = await t.services.voice.session(ws, session.voice_session_id);
  expect(row).toMatchObject({ status: 'ended', endReason: 'worker_lost' });
  const saved = await t.services.voice.recordingsOf({ voiceSessionId: session.voice_session_id });
  expect(saved.map((r) => r.id).sort()).toEqual(outcome.recordings.map((r) => r.id).sort());
  // The spool is dropped once the recordings are saved.
  expect(await em.execute('select 1 from voice_recording_chunks where session_id = ?', [session.voice_session_id])).toEqual([]);
  await browser.hangUp(false);
}, 90_000);
