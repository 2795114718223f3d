import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { transcriberFromConfig } from '../../app/extractor';
import { LocalWhisperTranscriber } from '../../providers/speech/whisper';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, testConfig, type TestApp } from '../support/app';
import { lastUserText, startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { maybeRecordHistory, startTestWorker } from '../support/temporal';
import { joinAsBrowser, speech8k } from '../../dev/fakes/voice-browser';
import { voiceWorkflowId } from '../../workflows/voice';
import { OUTCOME } from '../../worker/namespace-attributes';
import { VoiceWorkflows } from '../../app/temporal-clients/voice';
import { asApiError } from '../../api/http-errors';
import { answerOf } from '../support/http-error';
import { TokenVerifier } from 'livekit-server-sdk';
import { startFakeLiveKit } from '../support/fake-livekit';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let ws: string;
let auth: Record<string, string>;
let site: { site_id: string; site_secret: string };
let port: number;
const ORIGIN = 'https://shop.example';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'voice-test-'));

function reply(body: unknown) {
  const text = lastUserText(body).toLowerCase();
  if (text.includes('opening hours') || text.includes('open')) return { text: 'We are open from nine to five.' };
  if (text.includes('ship abroad')) return { text: 'Yes, we ship to most countries.' };
  if (text.includes('return')) return { text: LONG_ANSWER };
  return { text: 'Could you say that again?' };
}

const LONG_ANSWER = Array.from({ length: 8 }, (_, i) => `Rule number ${i + 1} of our returns policy says that items must come back unused within thirty days.`).join(' ');

/**
 * VOICE_MEDIA_TIMEOUT_SECONDS for this file: half the default. The live sessions of the other tests must never go
 * that long without a frame: the fake browser sends one every 20 ms. (5 s once ended live sessions on a loaded
 * machine, when the fake microphone's queue cost O(n) per sample and starved this process of CPU.)
 */
const MEDIA_TIMEOUT_S = 10;

const widget = (extra: Record<string, string> = {}) => ({ 'x-concierge-site': site.site_id, origin: ORIGIN, ...extra });

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply });
  const transcriber = transcriberFromConfig(testConfig());
  if (!transcriber) throw new Error('the whisper model is missing: npm run models:fetch');
  // A browser gone quiet ends after MEDIA_TIMEOUT_S (VOICE_MEDIA_TIMEOUT_SECONDS): the test waits that long.
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' }, transcriber }, { VOICE_MEDIA_TIMEOUT_SECONDS: MEDIA_TIMEOUT_S });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, serviceOptions: { transcriber } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish', 'conversations:read'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
  site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  await t.services.credits.grant(ws, 100);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
  // The model threads the worker loaded (Moonshine's, whisper's): left running, they keep Jest's process alive after the file.
  LocalWhisperTranscriber.unloadAll();
  MoonshineTranscriber.unloadAll();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('browser voice sessions (direct transport)', () => {
  it('hears the visitor, answers through the conversation actor with speech, streams transcript frames, takes inject_text, and stop saves three recordings', async () => {
    const init = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: widget(), payload: {} });
    expect(init.json().capabilities.voice_chat).toBe(true);
    const conversationId = init.json().conversation_id;
    const start = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: { conversation_id: conversationId } });
    expect(start.statusCode).toBe(200);
    const session = start.json();
    expect(session).toMatchObject({ transport: 'direct', room_name: session.voice_session_id, voice_mode: 'hands_free', conversation_id: conversationId });
    expect(session.rtc_url).toMatch(/^ws:\/\/.+\/api\/voice\/rtc$/);
    expect(session.voice_session_id).toMatch(/^vs_[0-9a-f]{24}$/);

    const browser = await joinAsBrowser(session, port);
    // A second of room noise first, as a microphone sends before anyone speaks.
    await new Promise((r) => setTimeout(r, 1000));
    browser.say(speech8k('What are your opening hours?', dir));
    await browser.until(() => browser.frames.some((f) => f.speaker === 'assistant' && !f.partial));
    const user = browser.frames.filter((f) => f.speaker === 'user');
    const finalUser = user.find((f) => !f.partial)!;
    expect(finalUser.text.toLowerCase()).toContain('opening hours');
    for (const f of browser.frames) expect(Object.keys(f).sort()).toEqual(['partial', 'speaker', 'text', 'timestamp', 'type']);
    const assistant = browser.frames.filter((f) => f.speaker === 'assistant');
    expect(assistant.some((f) => f.partial)).toBe(true);
    expect(assistant.at(-1)).toMatchObject({ partial: false, text: 'We are open from nine to five.' });
    // The agent's speech reaches the browser.
    await browser.until(() => browser.heard.length > 8000);
    expect(Math.max(...browser.heard.slice(0, 16000).map(Math.abs))).toBeGreaterThan(2000);

    const injected = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/inject_text', headers: widget(), payload: { voice_session_id: session.voice_session_id, text: 'Do you ship abroad?' } });
    expect(injected.statusCode).toBe(200);
    expect(injected.json()).toEqual({ ok: true });
    await browser.until(() => browser.frames.some((f) => f.speaker === 'assistant' && !f.partial && f.text.includes('ship to most countries')));

    const stop = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers: widget(), payload: { voice_session_id: session.voice_session_id } });
    expect(stop.statusCode).toBe(200);
    const stopped = stop.json();
    expect(stopped.ended).toBe(true);
    expect(stopped.recordings.map((r: { kind: string }) => r.kind).sort()).toEqual(['agent', 'caller', 'combined']);
    for (const r of stopped.recordings) expect(r.duration_ms).toBeGreaterThan(2000);
    expect(stopped.recordings.find((r: { kind: string }) => r.kind === 'combined').channels).toBe(2);
    await browser.hangUp();

    // Both sides are in the conversation's transcript, marked as said on the voice channel.
    const history = await t.app.inject({ method: 'GET', url: `/api/public/widget/history?conversation_id=${conversationId}`, headers: widget() });
    const texts = history.json().messages.map((m: { text: string }) => m.text);
    expect(texts).toEqual(expect.arrayContaining(['Do you ship abroad?', 'We are open from nine to five.', 'Yes, we ship to most countries.']));
    const row = await t.services.voice.session(ws, session.voice_session_id);
    expect(row).toMatchObject({ status: 'ended', endReason: 'stopped' });
    expect(row!.durationMs).toBeGreaterThan(0);
    // Stop again: the same recordings.
    const again = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers: widget(), payload: { voice_session_id: session.voice_session_id } });
    expect(again.json().recordings.map((r: { id: string }) => r.id).sort()).toEqual(stopped.recordings.map((r: { id: string }) => r.id).sort());
    // The workflow is visible by its id.
    const described = await tw.client.workflow.getHandle(voiceWorkflowId(session.voice_session_id)).describe();
    expect(described.status.name).toBe('COMPLETED');
    expect(described.typedSearchAttributes.get(OUTCOME)).toBe('succeeded');
    await maybeRecordHistory(tw.client, voiceWorkflowId(session.voice_session_id), 'voice-stopped-outcome');
    // Operators find it by workspace, labelled.
    const listed: string[] = [];
    for await (const w of tw.client.workflow.list({ query: `ConciergeWorkspaceId = '${ws}' AND WorkflowType = 'voiceSessionWorkflow'` })) listed.push(w.workflowId);
    expect(listed).toContain(voiceWorkflowId(session.voice_session_id));
    expect(await tw.client.workflow.getHandle(voiceWorkflowId(session.voice_session_id)).describe().then((d) => d.staticSummary())).toBe('browser voice session');
  }, 120_000);

  it('a stop before the browser joined ends the session at once, reason stopped (not after the workflow\'s 10 s grace and a cancel)', async () => {
    const session = (await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} })).json();
    // The media activity is waiting for the browser (phase joining) once it heartbeats.
    await new Promise((r) => setTimeout(r, 1000));
    const asked = Date.now();
    const stop = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers: widget(), payload: { voice_session_id: session.voice_session_id } });
    expect(stop.statusCode).toBe(200);
    expect(stop.json().ended).toBe(true);
    // The workflow cancels a media activity that did not end by itself within STOP_GRACE (10 s): well under it, the join heard the stop.
    expect(Date.now() - asked).toBeLessThan(10_000);
    expect(await t.services.voice.session(ws, session.voice_session_id)).toMatchObject({ status: 'ended', endReason: 'stopped' });
  });

  it('a browser that leaves (bye) ends the session, which keeps its recordings', async () => {
    const start = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} });
    expect(start.statusCode).toBe(200);
    const session = start.json();
    const browser = await joinAsBrowser(session, port);
    browser.say(speech8k('Hello there.', dir));
    await new Promise((r) => setTimeout(r, 3000));
    await browser.hangUp();
    const result = await tw.client.workflow.getHandle(voiceWorkflowId(session.voice_session_id)).result();
    expect(result.reason).toBe('visitor_left');
    expect(result.recordings).toHaveLength(3);
    await maybeRecordHistory(tw.client, voiceWorkflowId(session.voice_session_id), 'voice-visitor-left');
  }, 90_000);

  it('a browser that goes silent without leaving (no audio, no bye) is ended by the media timeout (VOICE_MEDIA_TIMEOUT_SECONDS), and the recordings are kept', async () => {
    const start = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} });
    const session = start.json();
    const browser = await joinAsBrowser(session, port);
    browser.say(speech8k('Hello there.', dir));
    await new Promise((r) => setTimeout(r, 2500));
    const mutedAt = Date.now();
    browser.mute();
    const result = await tw.client.workflow.getHandle(voiceWorkflowId(session.voice_session_id)).result();
    expect(result.reason).toBe('media_timeout');
    // The watchdog ends it once the last frame is older than the timeout; that frame left the browser before mutedAt.
    expect(Date.now() - mutedAt).toBeGreaterThanOrEqual(MEDIA_TIMEOUT_S * 1000 - 100);
    expect(result.recordings.map((r: { kind: string }) => r.kind).sort()).toEqual(['agent', 'caller', 'combined']);
    expect(await t.services.voice.session(ws, session.voice_session_id)).toMatchObject({ status: 'ended', endReason: 'media_timeout' });
    await browser.hangUp(false);
  }, 90_000);

  it('refuses a start with the contract codes: 403 toggle off, 429 at the limit, 402 without credits; bad signalling tokens are refused', async () => {
    // Joining sessions that never connect hold no slot and cost nothing: every minute they paid is refunded.
    const balance = (await t.services.credits.balance(ws)).balance;
    const reserve = () => t.services.voice.reserveSession({ workspaceId: ws, siteId: site.site_id, conversationId: 'conv_x', agentId: 'agt_x', customerId: null, transport: 'direct' });
    const unjoined = [await reserve(), await reserve()];
    // One of them also paid a second minute while it waited for the browser.
    await t.services.voice.payMinute(ws, unjoined[0].id, 2);
    for (const h of unjoined) await t.services.voice.markEnded(h.id, 'test');
    expect((await t.services.credits.balance(ws)).balance).toBe(balance);
    expect(await t.services.voice.session(ws, unjoined[0].id)).toMatchObject({ status: 'ended', creditsSpent: 0 });

    // 429: the widget's four slots (five, one kept for API calls) taken by connected sessions.
    const held = [];
    for (let i = await t.services.voice.activeCount(ws); i < 4; i++) {
      const h = await reserve();
      expect(await t.services.voice.markLive(h.id)).toBe(true);
      held.push(h);
    }
    const full = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} });
    expect(full.statusCode).toBe(429);
    expect(full.json().error).toBe('concurrent_voice_limit_reached');
    for (const h of held) await t.services.voice.markEnded(h.id, 'test');

    // 402: a workspace without credits.
    const poor = await createWorkspace(db.orm);
    const poorAuth = bearer((await createKey(t.services, poor, ['workflows:write', 'workflows:publish'])).key);
    const poorAgent = await publishedWebAgent(t.app, poorAuth, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
    const poorSite = await t.services.sites.create(poor, poorAgent, [ORIGIN]);
    const broke = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: { 'x-concierge-site': poorSite.site_id, origin: ORIGIN }, payload: {} });
    expect(broke.statusCode).toBe(402);
    expect(broke.json().error).toBe('out_of_credits');
    expect(await t.services.voice.calls(poor, { limit: 5 })).toEqual([]);

    // 403: voice_chat off.
    const quietAgent = await publishedWebAgent(t.app, auth, ORIGIN);
    const quietSite = await t.services.sites.create(ws, quietAgent, [ORIGIN]);
    const off = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: { 'x-concierge-site': quietSite.site_id, origin: ORIGIN }, payload: {} });
    expect(off.statusCode).toBe(403);
    expect(off.json().error).toBe('voice_chat_not_enabled');

    // Signalling: a forged token.
    const sock = new WebSocket(`ws://127.0.0.1:${port}/api/voice/rtc`);
    await new Promise((r) => sock.once('open', r));
    const reply = new Promise<Record<string, unknown>>((r) => sock.once('message', (d) => r(JSON.parse(String(d)))));
    sock.send(JSON.stringify({ type: 'join', token: `v1.vs_${'0'.repeat(24)}.cus_x.9999999999.${'a'.repeat(64)}` }));
    expect(await reply).toMatchObject({ type: 'error', error: 'invalid_token' });
    sock.close();

    // inject_text and stop name a session of this site only.
    const other = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/inject_text', headers: { 'x-concierge-site': quietSite.site_id, origin: ORIGIN }, payload: { voice_session_id: unjoined[0].id, text: 'hi' } });
    expect(other.statusCode).toBe(404);
  }, 60_000);
});

/** A signalling socket on `p` (default the app's); resolves once open, or with the refused handshake's status, headers and body. */
async function openSignal(p = port): Promise<{ sock: WebSocket; next: () => Promise<Record<string, unknown>> } | { status: number; headers: Record<string, unknown>; body: Record<string, unknown> }> {
  const sock = new WebSocket(`ws://127.0.0.1:${p}/api/voice/rtc`);
  const inbox: Array<Record<string, unknown>> = [];
  const waiters: Array<(f: Record<string, unknown>) => void> = [];
  sock.on('message', (d) => {
    const f = JSON.parse(String(d));
    const w = waiters.shift();
    if (w) w(f);
    else inbox.push(f);
  });
  const next = () => (inbox.length ? Promise.resolve(inbox.shift()!) : new Promise<Record<string, unknown>>((r) => waiters.push(r)));
  return new Promise((resolve, reject) => {
    sock.once('open', () => resolve({ sock, next }));
    sock.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(body) }));
    });
    sock.once('error', reject);
  });
}

describe('signalling socket limits (/api/voice/rtc)', () => {
  it('a second socket with a used rtc_token is refused (token_used) and does not disturb the live session', async () => {
    const session = (await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} })).json();
    const browser = await joinAsBrowser(session, port);
    const second = await openSignal();
    if (!('sock' in second)) throw new Error(`refused: ${second.status}`);
    second.sock.send(JSON.stringify({ type: 'join', token: session.rtc_token }));
    expect(await second.next()).toMatchObject({ type: 'error', error: 'token_used' });
    second.sock.close();
    await new Promise((r) => setTimeout(r, 1500));
    // The visitor's session goes on: still live, and it still answers.
    expect(await t.services.voice.session(ws, session.voice_session_id)).toMatchObject({ status: 'live' });
    const injected = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/inject_text', headers: widget(), payload: { voice_session_id: session.voice_session_id, text: 'Do you ship abroad?' } });
    expect(injected.statusCode).toBe(200);
    await browser.until(() => browser.frames.some((f) => f.speaker === 'assistant' && !f.partial && f.text.includes('ship to most countries')));
    const stop = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers: widget(), payload: { voice_session_id: session.voice_session_id } });
    expect(stop.statusCode).toBe(200);
    expect(await t.services.voice.session(ws, session.voice_session_id)).toMatchObject({ status: 'ended', endReason: 'stopped' });
    await browser.hangUp();
  }, 90_000);

  it('offers are capped: one larger than 16 KB is refused, and a socket gets at most 3', async () => {
    // A session whose agent never runs (no workflow): offers are only stored and wait for an answer.
    const conv = (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: widget(), payload: {} })).json();
    const mint = async () => {
      const row = await t.services.voice.reserveSession({ workspaceId: ws, siteId: site.site_id, conversationId: conv.conversation_id, agentId: 'agt_x', customerId: conv.customer_id, transport: 'direct' });
      return { row, room: await t.composition.voice.transport.createRoom({ voiceSessionId: row.id, workspaceId: ws, identity: conv.customer_id, ttlSeconds: 60 }) };
    };
    const big = await mint();
    const a = await openSignal();
    if (!('sock' in a)) throw new Error('refused');
    a.sock.send(JSON.stringify({ type: 'join', token: big.room.rtc_token }));
    expect(await a.next()).toMatchObject({ type: 'joined' });
    // About 28 KB: under the socket's 64 KB frame cap, over the offer's 16 KB.
    a.sock.send(JSON.stringify({ type: 'offer', sdp: `v=0\r\n${'a=x\r\n'.repeat(4_000)}` }));
    expect(await a.next()).toMatchObject({ type: 'error', error: 'frame_too_large' });
    expect(await t.services.voice.offer(big.row.id)).toBeNull();

    const many = await mint();
    const b = await openSignal();
    if (!('sock' in b)) throw new Error('refused');
    b.sock.send(JSON.stringify({ type: 'join', token: many.room.rtc_token }));
    expect(await b.next()).toMatchObject({ type: 'joined' });
    for (let i = 1; i <= 4; i++) b.sock.send(JSON.stringify({ type: 'offer', sdp: `v=0\r\no=- ${i} 0 IN IP4 0.0.0.0\r\n` }));
    expect(await b.next()).toMatchObject({ type: 'error', error: 'too_many_offers' });
    for (const m of [big, many]) await t.services.voice.markEnded(m.row.id, 'test');
  }, 30_000);

  it('sockets from one client address are capped before the upgrade: 429 rate_limited with Retry-After; a closed one frees its slot', async () => {
    const capped = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, config: { VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS: 3 } });
    const open: WebSocket[] = [];
    try {
      await capped.app.listen({ port: 0, host: '127.0.0.1' });
      const p = (capped.app.server.address() as AddressInfo).port;
      for (let i = 0; i < 3; i++) {
        const s = await openSignal(p);
        if (!('sock' in s)) throw new Error(`socket ${i + 1} refused: ${s.status}`);
        open.push(s.sock);
      }
      const refused = await openSignal(p);
      if ('sock' in refused) open.push(refused.sock);
      expect('status' in refused && refused.status).toBe(429);
      if (!('status' in refused)) return;
      expect(refused.body).toMatchObject({ error: 'rate_limited' });
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      // A closed socket frees its slot.
      open[0].close();
      await new Promise((r) => open[0].once('close', r));
      await new Promise((r) => setTimeout(r, 200));
      const again = await openSignal(p);
      expect('sock' in again).toBe(true);
      if ('sock' in again) open.push(again.sock);
    } finally {
      for (const s of open) s.terminate();
      await capped.close();
    }
  }, 30_000);
});

describe('barge-in', () => {
  it('the visitor speaking over a long answer stops its audio at once, and the new question is answered', async () => {
    const start = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} });
    const session = start.json();
    const browser = await joinAsBrowser(session, port);
    // The session is live once the worker has taken its workspace slot, just after the media connects.
    for (let i = 0; i < 50 && (await t.services.voice.session(ws, session.voice_session_id))?.status !== 'live'; i++) await new Promise((r) => setTimeout(r, 20));
    // A text turn whose answer is long (eight sentences, about 45 s of speech).
    const injected = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/inject_text', headers: widget(), payload: { voice_session_id: session.voice_session_id, text: 'Tell me about returns.' } });
    expect(injected.json()).toEqual({ ok: true });
    await browser.until(() => browser.heard.length > 8000 * 3);
    const heardBefore = browser.heard.length;

    const question = speech8k('What are your opening hours?', dir);
    // Where the spoken words begin in the clip (espeak-ng leads with a little silence).
    const onset = question.findIndex((s) => Math.abs(s) > 1000);
    const spokeAt = performance.now() + (onset / 8000) * 1000;
    browser.say(question);
    await browser.until(() => browser.frames.some((f) => f.speaker === 'assistant' && !f.partial && f.text === 'We are open from nine to five.'));

    // The long answer's last packet came soon after the visitor started to speak: the queued rest (tens of seconds) was dropped.
    const answerStart = browser.packets.findIndex((p) => p.marker && p.at > spokeAt);
    expect(answerStart).toBeGreaterThan(0);
    const cut = browser.packets[answerStart - 1].at;
    // At once: the VAD needs about 0.3 s of speech and the pipeline well under a second (1.5 s seen on a busy machine);
    // 3 s tells that apart from an answer left playing, whose rest was still about 40 s long.
    expect(cut - spokeAt).toBeLessThan(3000);
    expect(browser.packets[answerStart].at - cut).toBeGreaterThan(1000);
    // What the browser heard of the long answer: the seconds before the barge-in, not its 45 s.
    expect((browser.heard.length - heardBefore) / 8000).toBeLessThan(15);
    // The transcript: the spoken question, its final frame after the long answer's, then the short answer.
    const finals = browser.frames.filter((f) => !f.partial).map((f) => [f.speaker, f.text]);
    expect(finals[0]).toEqual(['user', 'Tell me about returns.']);
    expect(finals[1][0]).toBe('assistant');
    expect(finals[1][1]).toMatch(/^Rule number 1 of our returns policy/);
    expect(finals[2][0]).toBe('user');
    expect(finals[2][1]).toMatch(/opening hours?\b/i);
    expect(finals[3]).toEqual(['assistant', 'We are open from nine to five.']);
    await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers: widget(), payload: { voice_session_id: session.voice_session_id } });
    await browser.hangUp();
  }, 120_000);
});

describe('a workspace that cannot pay', () => {
  it('is not offered to visitors: /init reports voice_chat off (a warning says why, for the site owner) until credits are granted', async () => {
    const wsPoor = await createWorkspace(db.orm);
    const authPoor = bearer((await createKey(t.services, wsPoor, ['workflows:write', 'workflows:publish'])).key);
    const agentPoor = await publishedWebAgent(t.app, authPoor, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
    const sitePoor = await t.services.sites.create(wsPoor, agentPoor, [ORIGIN]);
    const init = async () => (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': sitePoor.site_id, origin: ORIGIN }, payload: {} })).json();
    const poor = await init();
    expect(poor.capabilities.voice_chat).toBe(false);
    expect(poor.capability_warnings).toEqual(expect.arrayContaining([expect.stringMatching(/no credits for a voice minute/)]));
    await t.services.credits.grant(wsPoor, 5);
    expect((await init()).capabilities.voice_chat).toBe(true);
  }, 30_000);
});

describe('credits during a session', () => {
  it('a session out of credits ends politely: the agent says goodbye, reason out_of_credits, recordings kept', async () => {
    // Its own workspace with one credit: the first period is paid at start, the second cannot be.
    const ws2 = await createWorkspace(db.orm);
    const auth2 = bearer((await createKey(t.services, ws2, ['workflows:write', 'workflows:publish'])).key);
    const agent2 = await publishedWebAgent(t.app, auth2, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
    const site2 = await t.services.sites.create(ws2, agent2, [ORIGIN]);
    await t.services.credits.grant(ws2, 1);
    const conv = (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': site2.site_id, origin: ORIGIN }, payload: {} })).json();
    const row = await t.services.voice.reserveSession({ workspaceId: ws2, siteId: site2.site_id, conversationId: conv.conversation_id, agentId: agent2, customerId: conv.customer_id, transport: 'direct' });
    expect((await t.services.credits.balance(ws2)).balance).toBe(0);
    const room = await t.composition.voice.transport.createRoom({ voiceSessionId: row.id, workspaceId: ws2, identity: conv.customer_id, ttlSeconds: 60 });
    // A 2-second billing period instead of a minute, so the second payment comes quickly.
    await new VoiceWorkflows(tw.client, tw.taskQueue).start({ voiceSessionId: row.id, workspaceId: ws2, conversationId: conv.conversation_id, siteId: site2.site_id, billingPeriodSeconds: 2 });
    const browser = await joinAsBrowser(room, port);
    const result = await tw.client.workflow.getHandle(voiceWorkflowId(row.id)).result();
    expect(result.reason).toBe('out_of_credits');
    expect(browser.frames.filter((f) => f.speaker === 'assistant' && !f.partial).map((f) => f.text)).toEqual([expect.stringMatching(/have to end this call/)]);
    expect(browser.heard.length).toBeGreaterThan(8000);
    expect(result.recordings).toHaveLength(3);
    expect(await t.services.voice.session(ws2, row.id)).toMatchObject({ status: 'ended', endReason: 'out_of_credits', creditsSpent: 1 });
    await browser.hangUp();
  }, 90_000);

  it('racing starts and joins are serialised per workspace: one visitor gets its 2 sessions, and at most 4 (5 less the API slot) connect', async () => {
    const ws3 = await createWorkspace(db.orm);
    await t.services.credits.grant(ws3, 100);
    const reserve = (visitorKey?: string) => t.services.voice.reserveSession({ workspaceId: ws3, siteId: 'site_x', conversationId: 'conv_x', agentId: 'agt_x', customerId: null, transport: 'direct', visitorKey });
    const attempts = await Promise.allSettled(Array.from({ length: 12 }, () => reserve('cus_racer')));
    expect(attempts.filter((a) => a.status === 'fulfilled')).toHaveLength(2);
    for (const a of attempts) if (a.status === 'rejected') expect(asApiError(a.reason)).toMatchObject({ code: 'rate_limited', status: 429 });
    expect((await t.services.credits.balance(ws3)).balance).toBe(98);
    // Twelve joining sessions of different visitors: all open, but only four connect.
    const rows = await Promise.all(Array.from({ length: 12 }, (_, i) => reserve(`cus_${i}`)));
    const live = await Promise.all(rows.map((r) => t.services.voice.markLive(r.id)));
    expect(live.filter(Boolean)).toHaveLength(4);
    expect(await t.services.voice.activeCount(ws3)).toBe(4);
  });
});

describe('one visitor cannot take the voice of a workspace (per-visitor and per-address caps; joining sessions hold no slot)', () => {
  it('five starts from one visitor and address: the caps answer 429 rate_limited with Retry-After, and neither another visitor nor an API call is blocked', async () => {
    const ws5 = await createWorkspace(db.orm);
    const auth5 = bearer((await createKey(t.services, ws5, ['workflows:write', 'workflows:publish'])).key);
    const agent5 = await publishedWebAgent(t.app, auth5, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
    const site5 = await t.services.sites.create(ws5, agent5, [ORIGIN]);
    await t.services.credits.grant(ws5, 100);
    const headers = { 'x-concierge-site': site5.site_id, origin: ORIGIN };
    const from = (remoteAddress: string) => ({
      init: async () => (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers, payload: {}, remoteAddress })).json(),
      start: (conversation_id: string) => t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers, payload: { conversation_id }, remoteAddress }),
    });
    const attacker = from('198.51.100.7');
    const started: string[] = [];
    try {
      // One visitor, five starts, never joined: two open, then the visitor's cap.
      const conv = await attacker.init();
      const codes = [];
      for (let i = 0; i < 5; i++) {
        const r = await attacker.start(conv.conversation_id);
        codes.push(r.statusCode);
        if (r.statusCode === 200) started.push(r.json().voice_session_id);
        else {
          expect(r.json()).toMatchObject({ error: 'rate_limited', message: expect.stringMatching(/visitor/) });
          expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
        }
      }
      expect(codes).toEqual([200, 200, 429, 429, 429]);
      // Fresh visitors from the same address: two more, then the address's cap.
      for (const expected of [200, 200, 429]) {
        const r = await attacker.start((await attacker.init()).conversation_id);
        expect(r.statusCode).toBe(expected);
        if (r.statusCode === 200) started.push(r.json().voice_session_id);
        else expect(r.json()).toMatchObject({ error: 'rate_limited', message: expect.stringMatching(/address/) });
      }
      // Another visitor elsewhere still starts: the four joining sessions hold none of the workspace's slots.
      const other = from('203.0.113.9');
      const ok = await other.start((await other.init()).conversation_id);
      expect(ok.statusCode).toBe(200);
      started.push(ok.json().voice_session_id);
      // And the API's dial-out (POST /api/v1/outbound takes its slot here) is not blocked either.
      const call = await t.services.voice.reserveCall({ workspaceId: ws5, siteId: null, conversationId: conv.conversation_id, agentId: agent5, phone: '+14155550123', provider: 'none' });
      expect(call.status).toBe('calling');
      await t.services.voice.callStatus(call.id, 'failed');
    } finally {
      for (const id of started) await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers, payload: { voice_session_id: id } });
    }
  }, 120_000);

  it('the widget never takes the slot kept for API calls: with four connected widget sessions a start is 429, an API call still gets the fifth slot', async () => {
    const ws6 = await createWorkspace(db.orm);
    await t.services.credits.grant(ws6, 100);
    const reserve = (i: number) => t.services.voice.reserveSession({ workspaceId: ws6, siteId: 'site_x', conversationId: 'conv_x', agentId: 'agt_x', customerId: null, transport: 'direct', visitorKey: `cus_${i}`, clientAddress: `198.51.100.${i}` });
    for (let i = 0; i < 4; i++) expect(await t.services.voice.markLive((await reserve(i)).id)).toBe(true);
    await expect(answerOf(reserve(9))).resolves.toMatchObject({ status: 429, code: 'concurrent_voice_limit_reached' });
    await expect(t.services.voice.reserveCall({ workspaceId: ws6, siteId: 'site_x', conversationId: 'conv_x', agentId: 'agt_x', phone: '+14155550123', provider: 'none' })).rejects.toMatchObject({ code: 'concurrent_voice_limit_reached' });
    const api = await t.services.voice.reserveCall({ workspaceId: ws6, siteId: null, conversationId: 'conv_x', agentId: 'agt_x', phone: '+14155550123', provider: 'none' });
    expect(api.status).toBe('calling');
    // Now the workspace is full for everyone.
    await expect(t.services.voice.reserveCall({ workspaceId: ws6, siteId: null, conversationId: 'conv_x', agentId: 'agt_x', phone: '+14155550123', provider: 'none' })).rejects.toMatchObject({ code: 'concurrent_voice_limit_reached' });
  });
});

describe('voice prerequisites', () => {
  it('init reports voice off with the reason, and start answers 503 voice_chat_prereq_failed, when this installation has no speech-to-text', async () => {
    const bare = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
    try {
      const init = await bare.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: widget(), payload: {} });
      expect(init.json().capabilities.voice_chat).toBe(false);
      expect(init.json().capability_warnings.join(' ')).toMatch(/voice_chat is enabled but no speech-to-text/);
      const start = await bare.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} });
      expect(start.statusCode).toBe(503);
      expect(start.json().error).toBe('voice_chat_prereq_failed');
    } finally {
      await bare.close();
    }
  });
});

describe("a workspace's own voice server (a voice credential)", () => {
  it("makes that workspace's rooms on its server, signs its visitors' tokens with its key and joins its agent there; another workspace stays on the installation's transport", async () => {
    const KEY = 'APIwsOwnKey1';
    const SECRET = 'own-livekit-secret-0123456789abcdef';
    const lk = await startFakeLiveKit({ apiKey: KEY, apiSecret: SECRET });
    try {
      const own = await createWorkspace(db.orm);
      const ownAuth = bearer((await createKey(t.services, own, ['workflows:write', 'workflows:publish', 'credentials:write'])).key);
      const ownAgent = await publishedWebAgent(t.app, ownAuth, ORIGIN, { triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true } } });
      const ownSite = await t.services.sites.create(own, ownAgent, [ORIGIN]);
      await t.services.credits.grant(own, 10);
      const cred = await t.app.inject({ method: 'POST', url: '/api/v1/credentials', headers: ownAuth, payload: { name: 'our LiveKit', provider: 'voice', url: lk.url, api_key: KEY, api_secret: SECRET } });
      expect(cred.statusCode).toBe(201);
      expect(cred.json()).toMatchObject({ provider: 'voice', settings: { url: lk.url, api_key: KEY }, last4: 'cdef' });

      const start = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: { 'x-concierge-site': ownSite.site_id, origin: ORIGIN }, payload: {} });
      expect(start.statusCode).toBe(200);
      const session = start.json();
      expect(session).toMatchObject({ transport: 'livekit', rtc_url: lk.url, room_name: session.voice_session_id });
      // The visitor's token is the workspace's server's, for that room only.
      const claims = await new TokenVerifier(KEY, SECRET).verify(session.rtc_token);
      expect(claims.video).toMatchObject({ room: session.voice_session_id, roomJoin: true });
      expect(lk.calls.filter((c) => c.method === 'CreateRoom').map((c) => c.body.name)).toEqual([session.voice_session_id]);
      expect(await t.services.voice.session(own, session.voice_session_id)).toMatchObject({ transport: 'livekit' });
      // The worker's agent joins that room on that server, with a token its key signs (this fake cannot complete the join).
      for (let i = 0; i < 300 && !lk.joins.some((j) => j.claims?.sub === 'agent'); i++) await new Promise((r) => setTimeout(r, 100));
      expect(lk.joins.find((j) => j.claims?.sub === 'agent')?.claims?.video).toMatchObject({ room: session.voice_session_id, roomJoin: true });

      // The file's workspace has no voice credential: the installation's embedded transport, nothing on that server.
      const other = await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/start', headers: widget(), payload: {} });
      expect(other.statusCode).toBe(200);
      expect(other.json()).toMatchObject({ transport: 'direct', rtc_url: expect.stringMatching(/\/api\/voice\/rtc$/) });
      expect(lk.calls.filter((c) => c.method === 'CreateRoom')).toHaveLength(1);
      for (const [headers, id] of [
        [{ 'x-concierge-site': ownSite.site_id, origin: ORIGIN }, session.voice_session_id],
        [widget(), other.json().voice_session_id],
      ] as const) {
        expect((await t.app.inject({ method: 'POST', url: '/api/public/widget/voice/stop', headers, payload: { voice_session_id: id } })).statusCode).toBe(200);
      }
    } finally {
      await lk.close();
    }
  }, 90_000);
});
