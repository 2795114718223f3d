import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { transcriberFromConfig } from '../../app/extractor';
import { LocalWhisperTranscriber } from '../../providers/speech/whisper';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import type { TranscriptFrame } from '../../domain/ports/voice';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, testConfig, type TestApp } from '../support/app';
import { lastUserText, startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { startTestWorker } from '../support/temporal';

/**
 * Issue 19's end-to-end voice call: a real headless Chromium whose fake microphone plays
 * an espeak-ng question loads the widget from the real app (its /demo page, an allowed
 * origin), starts a voice session, and talks over WebRTC (transport 'direct') with the
 * real worker's voice agent: the embedded Moonshine hears it, a fake OpenAI-compatible model
 * answers, espeak-ng speaks the answer back. Nothing between the page and the model is
 * faked.
 */

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
declare const document: any;
declare const AudioContext: any;

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const QUESTION = 'Hello there. I would like to know what your opening hours are during the week, whether you are also open on Saturday mornings, and whether the shop in the town centre keeps the same hours.';
const OPEN = 'We are open from nine to five.';
const SHIP = 'Yes, we ship to most countries.';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let browser: Browser;
let page: Page;
let base: string;
let siteId: string;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'voice-e2e-'));

function reply(body: unknown) {
  const text = lastUserText(body).toLowerCase();
  if (text.includes('ship abroad')) return { text: SHIP };
  if (text.includes('opening hours') || text.includes('open')) return { text: OPEN };
  return { text: 'Could you say that again?' };
}

/** A free loopback port: the app's public address (rtc_url) must be known before it is composed. */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * The fake microphone: the question between 1.5 s of silence before and 6 s after, 48 kHz
 * mono 16-bit. Chrome loops the file; the trailing pause lets the VAD end the turn and
 * leaves room for the agent's answer before the question comes round again. The question
 * is long (11.5 s): the agent transcribes the words so far every 0.9 s while the caller
 * speaks, a partial that comes back after the turn ended is (rightly) dropped, and on
 * two busy cores one Whisper pass can take 5-9 s, so "What are your opening hours?"
 * alone would show no partial at all.
 */
function micWav(): string {
  const speech = path.join(tmp, 'speech.wav');
  const mic = path.join(tmp, 'mic.wav');
  execFileSync('espeak-ng', ['-v', 'en-us', '-s', '150', '-w', speech, QUESTION]);
  execFileSync('ffmpeg', [
    '-loglevel', 'error', '-y', '-i', speech,
    '-af', 'aresample=48000,adelay=1500,apad=pad_dur=6',
    '-ar', '48000', '-ac', '1', '-c:a', 'pcm_s16le', mic,
  ]);
  return mic;
}

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply });
  const transcriber = transcriberFromConfig(testConfig());
  if (!transcriber) throw new Error('the whisper model is missing: npm run models:fetch');
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' }, transcriber });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, serviceOptions: { transcriber }, config: { PUBLIC_BASE_URL: base } });
  await t.app.listen({ port, host: '127.0.0.1' });
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish', 'conversations:read'])).key);
  const agentId = await publishedWebAgent(t.app, auth, base, { triggers: { web_chat: { allowed_origins: [base], voice_chat: true } } });
  siteId = (await t.services.sites.create(ws, agentId, [base])).site_id;
  await t.services.credits.grant(ws, 100);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${micWav()}`,
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
  page = await (await browser.newContext()).newPage();
}, 120_000);

afterAll(async () => {
  // A failed test leaves the call up: end it, so the worker's voice session stops before the worker does.
  await page?.evaluate(() => window.ConciergeWidget?.voice.stop()).catch(() => undefined);
  await browser?.close();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
  // The model threads the worker loaded: left running, they keep Jest's process alive after the file.
  LocalWhisperTranscriber.unloadAll();
  MoonshineTranscriber.unloadAll();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const frames = (): Promise<TranscriptFrame[]> => page.evaluate(() => window.voiceFrames);

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a voice call from the widget in Chromium, against the real app and worker', () => {
  test('the agent hears the spoken question and answers with audio; transcript frames, inject_text, and stop with three recordings', async () => {
    // Open: the session starts at once (a closed widget on a first page view starts none).
    await page.goto(`${base}/demo?site_id=${siteId}&open=1`);
    await page.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached', timeout: 20_000 });
    await page.evaluate(() => {
      window.voiceFrames = [];
      window.voiceStates = [];
      window.ConciergeWidget.on('voice:transcript', (f: unknown) => window.voiceFrames.push(f));
      window.ConciergeWidget.on('voice:state', (s: unknown) => window.voiceStates.push(s));
    });

    const session = await page.evaluate(() => window.ConciergeWidget.voice.start());
    expect(session).toMatchObject({ transport: 'direct', voice_mode: 'hands_free' });
    expect(session.voice_session_id).toMatch(/^vs_[0-9a-f]{24}$/);
    await expect(page.evaluate(() => window.voiceStates)).resolves.toEqual([{ state: 'live', ...session }]);

    // The remote audio: an analyser on the stream the widget plays records the loudest sample it has seen.
    await page.evaluate(() => {
      const audio = document.querySelector('[data-concierge-widget]').shadowRoot.querySelector('audio');
      const ctx = new AudioContext();
      const analyser = ctx.createAnalyser();
      ctx.createMediaStreamSource(audio.srcObject).connect(analyser);
      const buf = new Float32Array(analyser.fftSize);
      window.remotePeak = 0;
      setInterval(() => {
        analyser.getFloatTimeDomainData(buf);
        for (const s of buf) window.remotePeak = Math.max(window.remotePeak, Math.abs(s));
      }, 20);
    });

    // The question, heard by the speech-to-text: a turn's partials, then its final; then the model's answer, partial then final.
    // (The file loops: turns whose partial came back too late have none; the first turn with one is checked.)
    const turn = (fs: TranscriptFrame[]) => {
      const partial = fs.findIndex((f) => f.speaker === 'user' && f.partial);
      const final = partial < 0 ? -1 : fs.findIndex((f, i) => i > partial && f.speaker === 'user' && !f.partial);
      // Until that turn's final has come, an earlier turn's answer is not this turn's.
      const answer = final < 0 ? -1 : fs.findIndex((f, i) => i > final && f.speaker === 'assistant' && !f.partial);
      return { partial, final, answer };
    };
    // Until the agent has something to say, what the page receives is silence.
    await until(frames, (fs) => fs.some((f) => f.speaker === 'user' && !f.partial), 'the first final user frame', 60_000);
    expect(await page.evaluate(() => window.remotePeak as number)).toBeLessThan(0.01);
    const heard = await until(frames, (fs) => turn(fs).answer > 0, 'a turn with a partial, its final and the answer', 60_000);
    const { final, answer } = turn(heard);
    // Whisper base sometimes wrote "opening hour are" for the espeak voice (and a model may still).
    expect(heard[final].text).toMatch(/opening hours?\b/i);
    // The turn had a partial before its final: the wait above finds no turn without one. Its text is not compared with
    // the final's: the model hears a turn's start differently with more or less of it ("so nair i" in a partial, "so
    // there i" in its final), and once in CI a final of 82 characters came after a 119-character partial
    // (docs/voice.md, "Open question").
    expect(heard[answer].text).toBe(OPEN);
    expect(heard.slice(final, answer).some((f) => f.speaker === 'assistant' && f.partial)).toBe(true);

    // The agent's speech plays in the page: the widget's <audio> holds a live remote track whose sound is clearly above silence.
    await expect(
      page.evaluate(() => document.querySelector('[data-concierge-widget]').shadowRoot.querySelector('audio').srcObject.getAudioTracks().map((tr: any) => tr.readyState)),
    ).resolves.toEqual(['live']);
    await until(() => page.evaluate(() => window.remotePeak as number), (p) => p > 0.05, 'the agent audio to play');

    // Text said into the call: the model answers it in the call.
    await expect(page.evaluate(() => window.ConciergeWidget.voice.injectText('Do you ship abroad?'))).resolves.toEqual({ ok: true });
    await until(frames, (fs) => fs.some((f) => f.speaker === 'assistant' && !f.partial && f.text === SHIP), 'the answer to the injected text');

    const stopped = await page.evaluate(() => window.ConciergeWidget.voice.stop());
    expect(stopped.ended).toBe(true);
    expect(stopped.recordings.map((r: { kind: string }) => r.kind).sort()).toEqual(['agent', 'caller', 'combined']);
    for (const r of stopped.recordings) expect(r.duration_ms).toBeGreaterThan(5000);
    expect(stopped.recordings.find((r: { kind: string }) => r.kind === 'combined').channels).toBe(2);
    await expect(page.evaluate(() => window.voiceStates.at(-1))).resolves.toMatchObject({ state: 'ended', reason: 'visitor', voice_session_id: session.voice_session_id });

    // Every frame the page saw: exactly the contract's keys, `speaker` never `role`.
    const all = await frames();
    for (const f of all) expect(Object.keys(f).sort()).toEqual(['partial', 'speaker', 'text', 'timestamp', 'type']);
    expect(new Set(all.map((f) => f.speaker))).toEqual(new Set(['user', 'assistant']));

    // The conversation's transcript, as the widget reads it, holds both sides.
    const history = await page.evaluate(async (site: string) => {
      const res = await fetch(`/api/public/widget/history?limit=50&conversation_id=${window.ConciergeWidget.conversationId}`, { headers: { 'x-concierge-site': site } });
      return (await res.json()) as { messages: Array<{ role: string; text: string }> };
    }, siteId);
    const said = history.messages.map((m: { role: string; text: string }) => [m.role, m.text]);
    expect(said).toEqual(expect.arrayContaining([['user', 'Do you ship abroad?'], ['assistant', OPEN], ['assistant', SHIP]]));
    expect(said.some(([role, text]: string[]) => role === 'user' && /opening hours?\b/i.test(text))).toBe(true);
  }, 150_000);
});
