import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { AccessToken } from 'livekit-server-sdk';
import { WebSocketServer, type WebSocket } from 'ws';
import { DirectLeg } from '../../providers/webrtc/direct-peer';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { LOCAL_ICE_CIDRS } from '../support/ice';
import type { TranscriptFrame } from '../../domain/ports/voice';
import { startFakeLiveKit, type FakeLiveKit } from '../support/fake-livekit';

/**
 * The widget's voice call in a real headless Chromium whose fake microphone plays an
 * espeak-ng recording. A small server in this file plays the Concierge side: the widget's
 * HTTP calls (init, history, voice start/stop/inject_text) and, for transport 'direct', the
 * signalling socket, where the agent's real werift peer (DirectLeg) answers the browser's
 * offer, hears its audio and sends transcript frames on the browser's `transcript` channel.
 */

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
declare const document: any;

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'widget');
const WIDGET = fs.readFileSync(path.join(__dirname, '..', '..', 'web', 'widget.js'));
const SITE = 'site_voice_test';

interface Seen {
  method: string;
  path: string;
  site: string | undefined;
  body: any;
}

/** What the fake server does next; tests change it. */
const config: { voiceChat: boolean; startError: { status: number; error: string; message: string } | null; transport: 'direct' | 'livekit' } = {
  voiceChat: true,
  startError: null,
  transport: 'direct',
};
const seen: Seen[] = [];
/** The agent's side of each call, in order, with the largest sample it heard and its signalling socket. */
const calls: Array<{ leg: DirectLeg; loudest: number; frames: number; ws: WebSocket; bye: boolean }> = [];

let server: http.Server;
let base: string;
let browser: Browser;
let tmp: string;
let livekit: FakeLiveKit;

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url!, base);
  if (url.pathname === '/page') {
    res.writeHead(200, { 'Content-Type': 'text/html' }).end(`<!doctype html><html lang="en"><head><title>Shop</title></head><body><main><h1>Shop</h1></main><script src="/widget.js" data-site-id="${SITE}" data-open></script></body></html>`);
    return;
  }
  if (url.pathname === '/widget.js' || url.pathname === '/widget/livekit-client.js') {
    seen.push({ method: 'GET', path: url.pathname, site: undefined, body: null });
    res.writeHead(200, { 'Content-Type': 'application/javascript' }).end(url.pathname === '/widget.js' ? WIDGET : fs.readFileSync(require.resolve('livekit-client')));
    return;
  }
  let raw = '';
  for await (const chunk of req) raw += chunk;
  const route = url.pathname.replace('/api/public/widget/', '');
  seen.push({ method: req.method!, path: route, site: req.headers['x-concierge-site'] as string | undefined, body: raw ? JSON.parse(raw) : null });
  if (route === 'init') {
    json(res, 200, {
      conversation_id: 'conv_voice',
      customer_id: 'cus_1',
      auth_level: 'anonymous',
      agent: { id: 'agt_1', name: 'Store helper' },
      capabilities: { voice_chat: config.voiceChat, dial_out: false, file_upload: false },
      response_delivery: 'stream',
    });
  } else if (route === 'history') {
    json(res, 200, { messages: [], has_more: false, next_before: null });
  } else if (route === 'voice/start') {
    if (config.startError) return json(res, config.startError.status, { error: config.startError.error, message: config.startError.message });
    const n = seen.filter((s) => s.path === 'voice/start').length;
    if (config.transport === 'livekit') {
      const token = new AccessToken('lk_key', 'lk_secret_lk_secret_lk_secret_lk_secret', { identity: 'cus_1' });
      token.addGrant({ roomJoin: true, room: `vs_${n}` });
      return json(res, 200, { rtc_url: livekit.url, rtc_token: await token.toJwt(), room_name: `vs_${n}`, voice_session_id: `vs_${n}`, voice_mode: 'realtime', voice_animation_style: 'orb', transport: 'livekit' });
    }
    json(res, 200, {
      rtc_url: `${base.replace('http', 'ws')}/rtc`,
      rtc_token: `tok_${n}`,
      room_name: `vs_${n}`,
      voice_session_id: `vs_${n}`,
      voice_mode: 'realtime',
      voice_animation_style: 'orb',
      transport: 'direct',
    });
  } else if (route === 'voice/stop') {
    json(res, 200, { ended: true, recordings: [] });
  } else if (route === 'voice/inject_text') {
    json(res, 200, { ok: true });
  } else {
    json(res, 404, { error: 'not_found', message: 'no such route' });
  }
}

/** The signalling socket of transport 'direct', as the server speaks it. */
function signalling(ws: WebSocket): void {
  ws.on('message', async (data) => {
    const m = JSON.parse(data.toString());
    if (m.type === 'join') {
      if (!/^tok_\d+$/.test(m.token)) {
        ws.send(JSON.stringify({ type: 'error', error: 'invalid_token', message: 'This call link is not valid.' }));
        ws.close();
        return;
      }
      ws.send(JSON.stringify({ type: 'joined', room: `vs_${m.token.slice(4)}`, ice_servers: [] }));
    } else if (m.type === 'offer') {
      const { answerSdp, leg } = await DirectLeg.answer(m.sdp, { candidatePolicy: policyFromCidrs(LOCAL_ICE_CIDRS) });
      const call = { leg, loudest: 0, frames: 0, ws, bye: false };
      leg.onAudio((frame) => {
        call.frames++;
        for (const s of frame) call.loudest = Math.max(call.loudest, Math.abs(s));
      });
      calls.push(call);
      ws.send(JSON.stringify({ type: 'answer', sdp: answerSdp }));
    } else if (m.type === 'bye') {
      const call = calls.find((c) => c.ws === ws);
      if (call) call.bye = true;
    }
  });
}

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'widget-voice-'));
  // The fake microphone: spoken words, 48 kHz mono 16-bit (what Chrome's file capture reads).
  execFileSync('espeak-ng', ['-w', path.join(tmp, 'speech.wav'), 'Hello, I would like to know your opening hours.']);
  execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', path.join(tmp, 'speech.wav'), '-ar', '48000', '-ac', '1', '-c:a', 'pcm_s16le', path.join(tmp, 'mic.wav')]);

  server = http.createServer((req, res) => {
    handle(req, res).catch((e) => json(res, 500, { error: 'server', message: String(e) }));
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      // The reply socket is just held open; the signalling socket speaks the voice protocol.
      if (req.url?.startsWith('/rtc')) signalling(ws);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  livekit = await startFakeLiveKit({ apiKey: 'lk_key', apiSecret: 'lk_secret_lk_secret_lk_secret_lk_secret' });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${path.join(tmp, 'mic.wav')}`],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  for (const c of calls) await c.leg.close();
  await livekit?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  fs.rmSync(tmp, { recursive: true, force: true });
});

let context: BrowserContext;
let page: Page;
beforeEach(async () => {
  config.voiceChat = true;
  config.startError = null;
  config.transport = 'direct';
  seen.length = 0;
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await context.newPage();
});
afterEach(async () => {
  await context?.close();
});

const widget = () => page.locator('[data-concierge-widget]');
const micButton = () => widget().getByRole('button', { name: 'Voice call' });
const lines = () => widget().locator('.vt p');
const requests = (p: string) => seen.filter((s) => s.path === p);

async function openPage(): Promise<void> {
  await page.goto(`${base}/page`);
  await page.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached', timeout: 20_000 });
  await page.evaluate(() => {
    window.voiceEvents = [];
    window.ConciergeWidget.on('voice:state', (e: unknown) => window.voiceEvents.push(e));
    window.ConciergeWidget.on('voice:transcript', (f: unknown) => window.voiceEvents.push(f));
  });
}

async function until(fn: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts a call with the voice button and waits until the agent's peer is connected with its channel open. */
async function startCall(): Promise<(typeof calls)[number]> {
  const before = calls.length;
  await micButton().click();
  await until(() => calls.length > before, 'the offer');
  const call = calls[before];
  await widget().locator('.vs').filter({ hasText: 'On call with Store helper' }).waitFor({ timeout: 20_000 });
  await until(() => call.leg.channelOpen, 'the transcript channel');
  return call;
}

const frame = (speaker: 'user' | 'assistant', text: string, partial: boolean): TranscriptFrame => ({ type: 'transcript', speaker, text, timestamp: Date.now(), partial });

async function axeScan(): Promise<string[]> {
  await page.addScriptTag({ content: axe.source });
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return (result.violations as Array<{ id: string; impact: string; nodes: Array<{ target: unknown[] }> }>)
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => JSON.stringify(n.target)).join(' ')}`);
}

describe('the widget voice call (transport direct)', () => {
  test('no voice button when the agent does not offer voice chat', async () => {
    config.voiceChat = false;
    await openPage();
    await expect(widget().locator('.mic').count()).resolves.toBe(1);
    await expect(widget().locator('.mic').isVisible()).resolves.toBe(false);
    await expect(page.evaluate(() => window.ConciergeWidget.voice.session)).resolves.toBeNull();
  });

  test('a call: the mic reaches the agent, transcript partials are replaced by the final, text can be injected, End call stops it', async () => {
    await openPage();
    await expect(micButton().isVisible()).resolves.toBe(true);
    await expect(micButton().getAttribute('aria-pressed')).resolves.toBe('false');
    const call = await startCall();
    await expect(micButton().getAttribute('aria-pressed')).resolves.toBe('true');

    // /voice/start carried the site and the conversation; the socket was joined with the token, never a URL credential.
    expect(requests('voice/start')).toEqual([{ method: 'POST', path: 'voice/start', site: SITE, body: { conversation_id: 'conv_voice' } }]);
    // The fake microphone's speech arrives at the agent as PCMU: about a second of frames, clearly not silence.
    await until(() => call.frames >= 50, 'a second of microphone audio');
    expect(call.loudest).toBeGreaterThan(2000);
    // The agent's audio is routed to an <audio> element.
    await expect(widget().locator('audio').evaluate((a: any) => (a.srcObject ? a.srcObject.getAudioTracks().length : 0))).resolves.toBe(1);

    // One line per turn and speaker: partials rewrite it, the final fixes it; the next turn starts a new line.
    call.leg.sendTranscript(frame('user', 'Hello, I would', true));
    await lines().first().filter({ hasText: 'Hello, I would' }).waitFor();
    await expect(lines().first().getAttribute('class')).resolves.toBe('user partial');
    call.leg.sendTranscript(frame('user', 'Hello, I would like to know', true));
    call.leg.sendTranscript(frame('user', 'Hello, I would like to know your opening hours.', false));
    call.leg.sendTranscript(frame('assistant', 'We open', true));
    await lines().nth(1).filter({ hasText: 'We open' }).waitFor();
    call.leg.sendTranscript(frame('assistant', 'We open at nine, Monday to Saturday.', false));
    call.leg.sendTranscript(frame('user', 'Thanks', true));
    await lines().nth(2).filter({ hasText: 'Thanks' }).waitFor();
    await until(async () => (await lines().nth(1).getAttribute('class')) === 'assistant', 'the final assistant frame');
    await expect(lines().allTextContents()).resolves.toEqual([
      'You:Hello, I would like to know your opening hours.',
      'Store helper:We open at nine, Monday to Saturday.',
      'You:Thanks',
    ]);
    await expect(lines().evaluateAll((ps: any[]) => ps.map((p) => p.className))).resolves.toEqual(['user', 'assistant', 'user partial']);
    await expect(widget().getByRole('log', { name: 'Call transcript' }).count()).resolves.toBe(1);

    // The page observes the call and its frames, and can say text into it.
    const events = await page.evaluate(() => window.voiceEvents);
    expect(events[0]).toEqual({ state: 'live', voice_session_id: 'vs_1', room_name: 'vs_1', transport: 'direct', voice_mode: 'realtime', voice_animation_style: 'orb' });
    expect(events.filter((e: any) => e.type === 'transcript').map((e: any) => [e.speaker, e.text, e.partial])).toEqual([
      ['user', 'Hello, I would', true],
      ['user', 'Hello, I would like to know', true],
      ['user', 'Hello, I would like to know your opening hours.', false],
      ['assistant', 'We open', true],
      ['assistant', 'We open at nine, Monday to Saturday.', false],
      ['user', 'Thanks', true],
    ]);
    await expect(page.evaluate(() => window.ConciergeWidget.voice.session)).resolves.toEqual({
      state: 'live', voice_session_id: 'vs_1', room_name: 'vs_1', transport: 'direct', voice_mode: 'realtime', voice_animation_style: 'orb',
    });
    await expect(page.evaluate(() => window.ConciergeWidget.voice.injectText('What about Sundays?'))).resolves.toEqual({ ok: true });
    expect(requests('voice/inject_text')).toEqual([{ method: 'POST', path: 'voice/inject_text', site: SITE, body: { voice_session_id: 'vs_1', text: 'What about Sundays?' } }]);

    await expect(axeScan()).resolves.toEqual([]);
    await page.screenshot({ path: path.join(ARTIFACTS, 'voice-live.png') });

    // End call: "bye" on the signalling socket, the media stops, and the server is told.
    await widget().getByRole('button', { name: 'End call' }).click();
    await until(() => requests('voice/stop').length > 0, 'POST /voice/stop');
    expect(requests('voice/stop')).toEqual([{ method: 'POST', path: 'voice/stop', site: SITE, body: { voice_session_id: 'vs_1' } }]);
    expect(call.bye).toBe(true);
    await until(() => call.ws.readyState === call.ws.CLOSED, 'the signalling socket to close');
    await expect(widget().locator('audio').evaluate((a: any) => a.srcObject)).resolves.toBeNull();
    await expect(widget().locator('.vs').textContent()).resolves.toBe('Call ended');
    await expect(micButton().getAttribute('aria-pressed')).resolves.toBe('false');
    await expect(page.evaluate(() => window.ConciergeWidget.voice.session)).resolves.toBeNull();
    await expect(page.evaluate(() => window.voiceEvents.at(-1))).resolves.toMatchObject({ state: 'ended', reason: 'visitor', voice_session_id: 'vs_1' });
    // What was said stays readable until dismissed; the microphone is released.
    await expect(lines().count()).resolves.toBe(3);
    await expect(axeScan()).resolves.toEqual([]);
    await widget().getByRole('button', { name: 'Close transcript' }).click();
    await expect(widget().locator('.vc').isVisible()).resolves.toBe(false);
  });

  test('the server ending the call ("ended" on the signalling socket) stops it; a second click on the voice button ends a call too', async () => {
    await openPage();
    const first = await startCall();
    first.ws.send(JSON.stringify({ type: 'ended', reason: 'agent_hung_up' }));
    await until(() => requests('voice/stop').length === 1, 'POST /voice/stop');
    // Nothing was said: the call bar goes away with the call.
    await expect(widget().locator('.vc').isVisible()).resolves.toBe(false);
    expect(requests('voice/stop')[0].body).toEqual({ voice_session_id: 'vs_1' });
    await expect(page.evaluate(() => window.voiceEvents.at(-1))).resolves.toMatchObject({ state: 'ended', reason: 'agent_hung_up' });

    await startCall();
    await micButton().click();
    await until(() => requests('voice/stop').length === 2, 'the second POST /voice/stop');
    await expect(micButton().getAttribute('aria-pressed')).resolves.toBe('false');
  });

  test('the peer connection failing ends the call and says so', async () => {
    await openPage();
    const call = await startCall();
    await call.leg.close();
    await widget().getByRole('alert').filter({ hasText: 'The call was cut off. Please try again.' }).waitFor({ timeout: 30_000 });
    await until(() => requests('voice/stop').length === 1, 'POST /voice/stop');
  });

  test.each([
    [403, 'voice_chat_not_enabled', 'Voice chat is not enabled for this agent.'],
    [503, 'voice_chat_prereq_failed', 'Voice chat is not available right now.'],
    // Billing is the workspace's business: the visitor is told calls are off, never the server's words about credits.
    [402, 'out_of_credits', 'This workspace has run out of credits.', 'Calls are not available right now. You can keep chatting here.'],
    [429, 'concurrent_voice_limit_reached', 'Too many voice calls are in progress. Try again in a few minutes.'],
  ])('/voice/start answering %i %s: a message is shown as an alert, no call starts', async (status, error, message, shown = message) => {
    config.startError = { status, error, message };
    await openPage();
    await micButton().click();
    await widget().getByRole('alert').filter({ hasText: shown }).waitFor();
    if (shown !== message) await expect(widget().getByText(message).count()).resolves.toBe(0);
    await expect(micButton().getAttribute('aria-pressed')).resolves.toBe('false');
    await expect(widget().locator('.vc').isVisible()).resolves.toBe(false);
    expect(requests('voice/stop')).toEqual([]);
    if (error === 'out_of_credits') {
      await page.screenshot({ path: path.join(ARTIFACTS, 'voice-error.png') });
      await expect(axeScan()).resolves.toEqual([]);
    }
  });
});

describe('the widget voice call (transport livekit)', () => {
  test('the LiveKit SDK is fetched only when a call needs it, joins the room with the token, and a refused join ends the call with a message', async () => {
    config.transport = 'livekit';
    await openPage();
    expect(seen.filter((x) => x.path === '/widget/livekit-client.js')).toEqual([]);
    await micButton().click();
    // This fake LiveKit verifies the participant's token, then refuses to speak its signalling protocol.
    await widget().getByRole('alert').filter({ hasText: 'The call could not connect. Please try again.' }).waitFor({ timeout: 30_000 });
    expect(seen.filter((x) => x.path === '/widget/livekit-client.js')).toHaveLength(1);
    expect(livekit.joins.length).toBeGreaterThan(0);
    expect(livekit.joins[0].claims?.video).toMatchObject({ roomJoin: true, room: 'vs_1' });
    await until(() => requests('voice/stop').length === 1, 'POST /voice/stop');
    expect(requests('voice/stop')[0].body).toEqual({ voice_session_id: 'vs_1' });
    await expect(micButton().getAttribute('aria-pressed')).resolves.toBe('false');
  });
});
