// The voice bench's callers: a browser (direct WebRTC, as the widget: dev/fakes/voice-browser.ts joinAsBrowser) and a
// phone (the SIP leg: SIPp answers our dial-out on 127.0.0.1 for the signalling, and this process is the phone's media
// address, sending the caller's speech as paced PCMU RTP and timing the agent's packets). Each says its recordings one
// after the other and hears each answer out; times are epoch ms (performance.timeOrigin + performance.now()), so the
// worker's per-turn stats (Date.now()) line up with them.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RtpHeader, RtpPacket } from 'werift';
import { decodeMulaw, encodeMulaw } from '../../lib/audio/audio';
import { joinAsBrowser } from '../../dev/fakes/voice-browser';

export const epoch = () => performance.timeOrigin + performance.now();

/** One question as the caller lived it: its last sample sent, and the first packet of the answer (null: none came). */
export interface CallerTurn {
  recording: number;
  endAt: number;
  firstAt: number | null;
}

export interface CallerReport {
  turns: CallerTurn[];
  /** The phone's call (the bench ends it: POST /widget/call's call_id). */
  callId?: string;
  packets: number;
  /** Times the caller's playout ran dry (see `playout`). */
  underruns: number;
  /** The largest lateness of a packet past its play time (ms; 0: none late). */
  maxLateMs: number;
  /** The largest gap between the arrivals of two agent packets of one talkspurt (a marker packet starts one). */
  maxGapMs: number;
  /** The callers' process's event-loop delay during the run (ms): a late caller hears gaps the agent did not make. */
  loop?: LoopDelay;
}

/** An event loop's delay over a run (perf_hooks.monitorEventLoopDelay), in ms. */
export interface LoopDelay {
  p99: number;
  max: number;
}

/** Measures the event loop's delay from now until the returned function is called. */
export function watchLoop(): () => LoopDelay {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return () => {
    h.disable();
    return { p99: h.percentile(99) / 1e6, max: h.max / 1e6 };
  };
}

/** What a caller's line offers the turn loop. */
interface Line {
  say(samples: Int16Array): void;
  readonly speaking: boolean;
  /** When the last queued sample was sent (performance.now(); 0 before any). */
  readonly saidAt: number;
  /** The agent's packets as they arrived (performance.now()) with their RTP timestamps; `quiet`: silence between turns (the SIP leg keeps sending it). */
  readonly packets: ArrivedPacket[];
}

interface ArrivedPacket {
  at: number;
  marker: boolean;
  ts: number;
  quiet?: boolean;
}

export interface TurnOptions {
  /** The caller's jitter buffer (ms): see `playout`. */
  jitterBufferMs: number;
  turnTimeoutMs: number;
}

/**
 * The agent's audio as the caller plays it: each talkspurt (a marker packet starts one) plays from its first packet's
 * arrival plus `jitterBufferMs`, every packet at its RTP timestamp's place after that; a packet that arrives after its
 * play time is an underrun (the buffer ran dry: a gap is heard), and playout starts again from it, as a receiver
 * re-buffers. Packets that arrive early wait in the buffer. With a buffer of one packet (20 ms) and packets sent on the
 * clock, an underrun is a gap of more than 40 ms between two arrivals.
 */
export function playout(packets: ArrivedPacket[], jitterBufferMs: number): { underruns: number; maxLateMs: number; maxGapMs: number } {
  let underruns = 0;
  let maxLateMs = 0;
  let maxGapMs = 0;
  let anchor: { at: number; ts: number } | null = null;
  for (const [i, p] of packets.entries()) {
    if (i > 0 && !p.marker) maxGapMs = Math.max(maxGapMs, p.at - packets[i - 1].at);
    if (!anchor || p.marker) {
      anchor = { at: p.at + jitterBufferMs, ts: p.ts };
      continue;
    }
    // RTP timestamps wrap at 2^32 (8 kHz: 8 samples a ms).
    const playAt = anchor.at + ((p.ts - anchor.ts) >>> 0) / 8;
    const late = p.at - playAt;
    if (late > 0) {
      underruns++;
      maxLateMs = Math.max(maxLateMs, late);
      anchor = { at: p.at + jitterBufferMs, ts: p.ts };
    }
  }
  return { underruns, maxLateMs, maxGapMs };
}

/**
 * Says `order` (indexes into `speech`) one by one: after each, waits for the answer's first packet that starts a
 * talkspurt (a reply to this question, not the tail of an earlier one) and for the answer to end (no packet for 400 ms).
 */
async function converse(line: Line, speech: Int16Array[], order: number[], o: TurnOptions): Promise<CallerReport> {
  const until = async (cond: () => boolean, ms: number) => {
    for (const end = performance.now() + ms; !cond(); await new Promise((r) => setTimeout(r, 5))) if (performance.now() > end) return false;
    return true;
  };
  const turns: CallerTurn[] = [];
  // Room noise first, as a microphone sends before anyone speaks; staggered a little between sessions.
  await new Promise((r) => setTimeout(r, 500 + Math.random() * 500));
  for (const recording of order) {
    const before = line.saidAt;
    line.say(speech[recording]);
    if (!(await until(() => !line.speaking && line.saidAt > before, 60_000))) throw new Error('the caller could not finish speaking');
    const endAt = line.saidAt;
    const first = () => line.packets.find((p) => p.at > endAt && p.marker);
    await until(() => first() !== undefined, o.turnTimeoutMs);
    const firstAt = first()?.at;
    turns.push({ recording, endAt: performance.timeOrigin + endAt, firstAt: firstAt === undefined ? null : performance.timeOrigin + firstAt });
    if (process.env.BENCH_VOICE_DEBUG) console.error(`[caller] recording ${recording}: ${firstAt === undefined ? 'no answer' : `${(firstAt - endAt).toFixed(0)} ms`}, ${line.packets.length} packets`);
    await until(() => performance.now() - (line.packets.findLast((x) => !x.quiet)?.at ?? 0) > 400, 60_000);
    await new Promise((r) => setTimeout(r, 300 + Math.random() * 400));
  }
  return { turns, packets: line.packets.length, ...playout(line.packets, o.jitterBufferMs) };
}

/** A browser's voice session through POST /api/public/widget/voice/start on the API at 127.0.0.1:`port`. */
export async function browserCaller(api: { port: number; siteId: string; origin: string }, speech: Int16Array[], order: number[], o: TurnOptions): Promise<CallerReport> {
  const res = await fetch(`http://127.0.0.1:${api.port}/api/public/widget/voice/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-concierge-site': api.siteId, origin: api.origin },
    body: '{}',
  });
  if (res.status !== 200) throw new Error(`voice/start answered ${res.status}: ${await res.text()}`);
  const browser = await joinAsBrowser((await res.json()) as { rtc_url: string; rtc_token: string }, api.port);
  try {
    const line: Line = {
      say: (s) => browser.say(s),
      get speaking() {
        return browser.speaking;
      },
      get saidAt() {
        return browser.saidAt;
      },
      packets: browser.packets,
    };
    return await converse(line, speech, order, o);
  } finally {
    await browser.hangUp();
  }
}

/** SIPp answering one call on 127.0.0.1 and waiting for our BYE (test/fixtures/sipp/answer-wait-bye.xml), its SDP answer naming `mediaPort`. */
export function sippAnswering(mediaPort: number, sipPort: number): { uri: string; inviteSdp: () => string; stop: () => void; exited: Promise<number | null> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-sipp-'));
  const fields: Record<string, string> = { CODEC: '0', MEDIA: '', MEDIA_PORT: String(mediaPort) };
  const xml = fs.readFileSync(path.resolve(__dirname, '../../test/fixtures/sipp/answer-wait-bye.xml'), 'utf8').replace(/@@([A-Z_]+)@@/g, (m, name: string) => fields[name] ?? m);
  const scenario = path.join(dir, 'answer.xml');
  fs.writeFileSync(scenario, xml);
  const messages = path.join(dir, 'messages.log');
  const args = ['-sf', scenario, '-i', '127.0.0.1', '-p', String(sipPort), '-mp', String(sipPort + 2), '-m', '1', '-nostdin', '-trace_msg', '-message_file', messages, '-timeout', '900s'];
  const child = spawn('sipp', args, { cwd: dir, stdio: 'ignore' });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  void exited.then(() => fs.rmSync(dir, { recursive: true, force: true }));
  return {
    uri: `sip:127.0.0.1:${sipPort}`,
    inviteSdp: () => (fs.existsSync(messages) ? fs.readFileSync(messages, 'utf8') : ''),
    stop: () => {
      if (child.exitCode === null) child.kill('SIGTERM');
    },
    exited,
  };
}

/**
 * The phone's media for a call SIPp answered: a UDP socket on 127.0.0.1 (the address SIPp's SDP answer gives), which
 * sends the caller's speech to our leg's RTP port (the INVITE's SDP, read from SIPp's trace) as 20 ms PCMU packets,
 * quiet noise between questions, and records the agent's packets.
 */
export async function phoneMedia(socket: dgram.Socket, invite: () => string, o: TurnOptions, speech: Int16Array[], order: number[]): Promise<CallerReport> {
  let port = 0;
  for (const end = Date.now() + 60_000; !port; await new Promise((r) => setTimeout(r, 50))) {
    const m = /m=audio (\d+) /.exec(invite());
    if (m) port = Number(m[1]);
    else if (Date.now() > end) throw new Error('no INVITE with an SDP offer reached SIPp');
  }
  const packets: ArrivedPacket[] = [];
  socket.on('message', (buf) => {
    const p = RtpPacket.deSerialize(buf);
    if (p.header.payloadType !== 0) return;
    const pcm = decodeMulaw(p.payload);
    let peak = 0;
    for (const x of pcm) peak = Math.max(peak, Math.abs(x));
    packets.push({ at: performance.now(), marker: p.header.marker, ts: p.header.timestamp, quiet: peak < 64 });
  });
  let queue = new Int16Array(0);
  let pos = 0;
  let seq = 1;
  let ts = 0;
  let saidAt = 0;
  const started = performance.now();
  let sent = 0;
  // Paced against the clock (a late timer sends what is due), as a phone's 20 ms packetization.
  const timer = setInterval(() => {
    while (sent * 20 <= performance.now() - started) {
      sent++;
      const frame = new Int16Array(160);
      const speaking = pos < queue.length;
      for (let i = 0; i < 160; i++) frame[i] = pos < queue.length ? queue[pos++] : Math.round((Math.random() - 0.5) * 40);
      if (speaking && pos >= queue.length) saidAt = performance.now();
      const header = new RtpHeader({ payloadType: 0, sequenceNumber: seq++ & 0xffff, timestamp: (ts += 160) >>> 0, ssrc: 0x5eed });
      socket.send(new RtpPacket(header, Buffer.from(encodeMulaw(frame))).serialize(), port, '127.0.0.1');
    }
  }, 10);
  try {
    const line: Line = {
      say: (s) => {
        const rest = queue.subarray(pos);
        queue = new Int16Array(rest.length + s.length);
        queue.set(rest);
        queue.set(s, rest.length);
        pos = 0;
      },
      get speaking() {
        return pos < queue.length;
      },
      get saidAt() {
        return saidAt;
      },
      packets,
    };
    return await converse(line, speech, order, o);
  } finally {
    clearInterval(timer);
  }
}
