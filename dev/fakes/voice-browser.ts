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

/** One agent RTP packet as the browser received it: when (performance.now()), whether it starts a talkspurt, its RTP timestamp. */
export interface AgentPacket {
  at: number;
  marker: boolean;
  ts: number;
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
      packets.push({ at: performance.now(), marker: rtp.header.marker, ts: rtp.header.timestamp });
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
