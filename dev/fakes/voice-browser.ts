import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { MediaStreamTrack, RTCPeerConnection, RtpHeader, RtpPacket, usePCMU } from 'werift';
import WebSocket from 'ws';
import { decodeMulaw, encodeMulaw, wavToMono } from '../../lib/audio/audio';
import type { TranscriptFrame } from '../../domain/ports/voice';

/** espeak-ng speech at 8 kHz, as the phone line / PCMU leg carries it (the WAV is written in `dir`). */
export function speech8k(text: string, dir: string): Int16Array {
  const file = path.join(dir, `${text.length}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.wav`);
  execFileSync('espeak-ng', ['-v', 'en-us', '-s', '150', '-w', file, text]);
  return wavToMono(fs.readFileSync(file), 8000);
}

/** One agent RTP packet as the browser received it: when (performance.now()), and whether it starts a talkspurt. */
export interface AgentPacket {
  at: number;
  marker: boolean;
}

export type VoiceBrowser = Awaited<ReturnType<typeof joinAsBrowser>>;

/**
 * The browser's side of a direct voice session, as the widget does it: signalling over
 * the socket (join, offer, answer), a werift peer sending 8 kHz PCMU and reading the
 * `transcript` channel. `port`: the API's port on 127.0.0.1 (the session's rtc_url names
 * the public origin).
 */
export async function joinAsBrowser(session: { rtc_url: string; rtc_token: string }, port: number) {
  const url = session.rtc_url.replace(/:\/\/[^/]+/, `://127.0.0.1:${port}`);
  const sock = new WebSocket(url);
  const inbox: Array<Record<string, unknown>> = [];
  let notify = () => undefined as void;
  sock.on('message', (d) => {
    inbox.push(JSON.parse(String(d)));
    notify();
  });
  const next = async (type: string) => {
    for (let i = 0; i < 400; i++) {
      const at = inbox.findIndex((m) => m.type === type || m.type === 'error');
      if (at >= 0) {
        const frame = inbox.splice(at, 1)[0];
        if (frame.type !== type) throw new Error(`expected a ${type} frame, got ${JSON.stringify(frame)}`);
        return frame;
      }
      await new Promise<void>((r) => {
        notify = r;
        setTimeout(r, 100);
      });
    }
    throw new Error(`no ${type} frame`);
  };
  await new Promise((r, j) => sock.once('open', r).once('error', j));
  sock.send(JSON.stringify({ type: 'join', token: session.rtc_token }));
  await next('joined');
  const pc = new RTCPeerConnection({ codecs: { audio: [usePCMU()], video: [] }, bundlePolicy: 'max-bundle' });
  const mic = new MediaStreamTrack({ kind: 'audio' });
  pc.addTransceiver(mic, { direction: 'sendrecv' });
  const channel = pc.createDataChannel('transcript');
  const frames: TranscriptFrame[] = [];
  channel.onMessage.subscribe((d) => frames.push(JSON.parse(d.toString())));
  const heard: number[] = [];
  const packets: AgentPacket[] = [];
  pc.onTrack.subscribe((track) =>
    track.onReceiveRtp.subscribe((rtp) => {
      packets.push({ at: performance.now(), marker: rtp.header.marker });
      heard.push(...decodeMulaw(rtp.payload));
    }),
  );
  await pc.setLocalDescription(await pc.createOffer());
  if (pc.iceGatheringState !== 'complete') await pc.iceGatheringStateChange.watch((s) => s === 'complete');
  sock.send(JSON.stringify({ type: 'offer', sdp: pc.localDescription!.sdp }));
  const answer = await next('answer');
  await pc.setRemoteDescription({ type: 'answer', sdp: answer.sdp as string });
  if (pc.connectionState !== 'connected') await pc.connectionStateChange.watch((s) => s === 'connected');

  // The microphone: a queue of samples, paced at 20 ms; quiet noise when nothing is queued (a real mic is never digital silence).
  // Speech waiting to be sent, read from `pos` on (an array shifted sample by sample costs O(n) a sample).
  let queue = new Int16Array(0);
  let pos = 0;
  let seq = 1;
  let ts = 0;
  /** When the last queued sample was sent (performance.now()): the end of the visitor's speech. */
  let saidAt = 0;
  const timer = setInterval(() => {
    const frame = new Int16Array(160);
    const speaking = pos < queue.length;
    for (let i = 0; i < 160; i++) frame[i] = pos < queue.length ? queue[pos++] : Math.round((Math.random() - 0.5) * 40);
    if (speaking && pos >= queue.length) saidAt = performance.now();
    mic.writeRtp(new RtpPacket(new RtpHeader({ payloadType: 0, sequenceNumber: seq++ & 0xffff, timestamp: (ts += 160) >>> 0 }), Buffer.from(encodeMulaw(frame))));
  }, 20);
  return {
    frames,
    heard,
    /** Every agent RTP packet received, in order. */
    packets,
    say: (samples: Int16Array) => {
      const rest = queue.subarray(pos);
      queue = new Int16Array(rest.length + samples.length);
      queue.set(rest);
      queue.set(samples, rest.length);
      pos = 0;
    },
    /** Whether queued speech is still being sent. */
    get speaking() {
      return pos < queue.length;
    },
    /** When the last queued speech finished sending (performance.now(); 0 before any). */
    get saidAt() {
      return saidAt;
    },
    async until(pred: () => boolean, ms = 60_000) {
      const end = Date.now() + ms;
      while (!pred()) {
        if (Date.now() > end) throw new Error(`timed out; frames: ${JSON.stringify(frames)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    /** The connection stays up but no audio is sent any more (a tab frozen, a network gone quiet). */
    mute() {
      clearInterval(timer);
    },
    async hangUp(bye = true) {
      clearInterval(timer);
      if (bye && sock.readyState === sock.OPEN) sock.send(JSON.stringify({ type: 'bye' }));
      sock.close();
      await pc.close();
    },
  };
}

/** Questions a visitor asks, spoken by espeak-ng. */
export const VISITOR_QUESTIONS = [
  'What are your opening hours?',
  'Do you ship to Canada?',
  'How much does delivery cost?',
  'Can I return a jacket?',
  'Where is my parcel?',
  'Do you have this in blue?',
];

/** One session as its talking visitor saw it. */
export interface VisitorReport {
  /** Per turn: the last speech sample sent → the first agent packet after it (ms); null when no answer came. */
  e2eMs: Array<number | null>;
  packets: number;
  /** Gaps over `underrunGapMs` between two agent packets of one talkspurt (a marker packet starts one: the gap before it is silence between replies). */
  underruns: number;
  maxGapMs: number;
}

/**
 * A visitor who opens a voice session through POST /api/public/widget/voice/start on the API at 127.0.0.1:`port`,
 * waits in room noise, then asks `turns` questions (`speech[offset + i]`, 8 kHz) and hears each answer out.
 */
export async function talkingVisitor(
  api: { port: number; siteId: string; origin: string },
  turns: number,
  speech: Int16Array[],
  offset: number,
  opts: { underrunGapMs: number; turnTimeoutMs: number },
): Promise<VisitorReport> {
  const res = await fetch(`http://127.0.0.1:${api.port}/api/public/widget/voice/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-concierge-site': api.siteId, origin: api.origin },
    body: '{}',
  });
  if (res.status !== 200) throw new Error(`voice/start answered ${res.status}: ${await res.text()}`);
  const browser = await joinAsBrowser((await res.json()) as { rtc_url: string; rtc_token: string }, api.port);
  const until = async (cond: () => boolean, ms: number, what: string) => {
    for (const end = performance.now() + ms; !cond(); await new Promise((r) => setTimeout(r, 10))) if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
  };
  const e2eMs: Array<number | null> = [];
  try {
    // Room noise first, as a microphone sends before anyone speaks; staggered a little between sessions.
    await new Promise((r) => setTimeout(r, 500 + Math.random() * 500));
    for (let i = 0; i < turns; i++) {
      const finals = () => browser.frames.filter((f) => f.speaker === 'assistant' && !f.partial).length;
      const before = finals();
      browser.say(speech[(offset + i) % speech.length]);
      await until(() => !browser.speaking && browser.saidAt > 0, 30_000, 'the browser to finish speaking');
      const saidAt = browser.saidAt;
      try {
        await until(() => finals() > before, opts.turnTimeoutMs, 'an answer');
        const first = browser.packets.find((p) => p.at > saidAt);
        e2eMs.push(first ? first.at - saidAt : null);
        // The answer heard out: no agent packet for 300 ms.
        await until(() => performance.now() - (browser.packets.at(-1)?.at ?? 0) > 300, 30_000, 'the answer to end');
      } catch {
        e2eMs.push(null);
      }
      await new Promise((r) => setTimeout(r, 300 + Math.random() * 500));
    }
    const p = browser.packets;
    const gaps = p.slice(1).flatMap((x, i) => (x.marker ? [] : [x.at - p[i].at]));
    return { e2eMs, packets: p.length, underruns: gaps.filter((g) => g > opts.underrunGapMs).length, maxGapMs: Math.max(0, ...gaps) };
  } finally {
    await browser.hangUp();
  }
}
