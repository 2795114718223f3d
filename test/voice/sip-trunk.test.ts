import dgram from 'node:dgram';
import { encodeAlaw, encodeMulaw } from '../../lib/audio/audio';
import { RtpHeader, RtpPacket } from 'werift';
import { DialFailed } from '../../domain/ports/voice';
import { decodeTelephoneEvent, encodeTelephoneEvent, telephoneEventPackets } from '../../lib/audio/dtmf';
import { header, parseMessage } from '../../lib/sip/message';
import type { RtpLeg } from '../../lib/sip/rtp-leg';
import { SipTrunkTelephony, type SipTrunkSettings } from '../../providers/telephony/sip-trunk';
import type { DialOutInput, MediaLeg } from '../../domain/ports/voice';
import { sippInstalled, startSipp, writeMulawFile, type SippRun } from '../support/sipp';
import { carryOutPhoneControl, keypadTurns, screenAnsweredCall } from '../../domain/voice/phone-call';
import { decodeMulaw } from '../../lib/audio/audio';
import { spokenPcm } from '../support/test-phone';

/**
 * The direct SIP trunk against SIPp (Debian sip-tester) on loopback: real SIP over UDP
 * and G.711 RTP. SIPp plays the far end's part (answers, rings out, is busy, challenges
 * with digest auth, hangs up) and exits 0 only when its scenario ran to the end, so a
 * BYE, CANCEL or ACK we failed to send fails the test.
 */

const FROM = '+14155550100';
const TO = '+14155550123';
const input: DialOutInput = { callId: 'call_test', workspaceId: 'ws_test', to: TO, room_name: 'call_test' };

/** `ms` of a sine at `hz` (MEDIA_RATE). */
function tone(ms: number, hz: number): Int16Array {
  const out = new Int16Array(ms * 8);
  for (let i = 0; i < out.length; i++) out[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / 8000));
  return out;
}

const peak = (f: Int16Array) => f.reduce((m, s) => Math.max(m, Math.abs(s)), 0);
/** The frame's frequency from its zero crossings (a pure tone's is exact to a few Hz over 20 ms). */
function frequency(f: Int16Array): number {
  let crossings = 0;
  for (let i = 1; i < f.length; i++) if ((f[i - 1] < 0) !== (f[i] < 0)) crossings++;
  return (crossings / 2) * (8000 / f.length);
}

const telephony = (sipp: SippRun, extra: Partial<SipTrunkSettings> = {}) => new SipTrunkTelephony({ uri: sipp.uri, fromNumber: FROM, ...extra });

async function dial(t: SipTrunkTelephony, signal = new AbortController().signal): Promise<{ leg: MediaLeg; progress: string[]; frames: Int16Array[] }> {
  const progress: string[] = [];
  const leg = await t.dial(input, (s) => progress.push(s), signal);
  const frames: Int16Array[] = [];
  leg.onAudio((f) => frames.push(f));
  return { leg, progress, frames };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const failure = (p: Promise<unknown>) => p.then(() => null, (err: unknown) => err);

const describeSipp = sippInstalled ? describe : describe.skip;
if (!sippInstalled) {
  test.skip('SIP trunk tests skipped: sipp is not installed (Debian package sip-tester)', () => undefined);
}

describeSipp('direct SIP trunk against SIPp', () => {
  let sipp: SippRun | null = null;
  afterEach(() => {
    sipp?.stop();
    sipp = null;
  });

  test('SIP from an address other than the trunk is ignored: a forged BYE from 127.0.0.2 neither ends the call nor gets an answer; the same BYE from the trunk does', async () => {
    sipp = await startSipp({ scenario: 'answer-wait-bye' });
    const { leg } = await dial(telephony(sipp));
    // SIPp writes its message trace through a buffer: the 200 OK it sent may reach the file after our dial returned
    // (CI once read the trace without it).
    let trace = sipp.trace();
    for (let waited = 0; !/SIP\/2\.0 200 OK[\s\S]*?^To:.*;tag=/m.test(trace) && waited < 5_000; waited += 50) {
      await wait(50);
      trace = sipp.trace();
    }
    const invite = parseMessage(trace.slice(trace.indexOf('INVITE sip:'), trace.indexOf('\n\n', trace.indexOf('INVITE sip:')) + 2).replace(/\n/g, '\r\n'))!;
    const ok = trace.slice(trace.indexOf('SIP/2.0 200 OK'));
    const toTag = /^To:.*;tag=([^;\s]+)/m.exec(ok)![1];
    const [, ourHost, ourPort] = /SIP\/2\.0\/UDP ([^:;]+):(\d+)/.exec(header(invite, 'Via')!)!;
    const bye = [
      `BYE sip:${ourHost}:${ourPort} SIP/2.0`,
      'Via: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bKforged1',
      `From: <sip:callee@127.0.0.1>;tag=${toTag}`,
      `To: ${header(invite, 'From')}`,
      `Call-ID: ${header(invite, 'Call-ID')}`,
      'CSeq: 50 BYE',
      'Max-Forwards: 70',
      'Content-Length: 0',
      '',
      '',
    ].join('\r\n');
    const ended = leg.ended.then((r) => r);
    const send = async (from: string) => {
      const socket = dgram.createSocket('udp4');
      await new Promise<void>((r) => socket.bind(0, from, r));
      const answers: string[] = [];
      socket.on('message', (m) => answers.push(m.toString().split('\r\n')[0]));
      socket.send(bye, Number(ourPort), '127.0.0.1');
      await wait(700);
      socket.close();
      return answers;
    };
    expect(await send('127.0.0.2')).toEqual([]);
    expect(await Promise.race([ended, wait(100).then(() => 'still up')])).toBe('still up');
    expect(await send('127.0.0.1')).toEqual(['SIP/2.0 200 OK']);
    await expect(ended).resolves.toBe('remote_hung_up');
    await leg.close();
  }, 30_000);

  test("RTP from an address other than the far end's media address is ignored (no audio injection); the far end's address is heard", async () => {
    sipp = await startSipp({ scenario: 'answer-wait-bye' });
    const { leg, frames } = await dial(telephony(sipp));
    const port = (leg as RtpLeg).localPort;
    const blast = async (from: string) => {
      const socket = dgram.createSocket('udp4');
      await new Promise<void>((r) => socket.bind(0, from, r));
      for (let i = 0; i < 25; i++) {
        const header = Buffer.from([0x80, 0, 0, i, 0, 0, 0, i * 160, 0, 0, 0, 7]);
        socket.send(Buffer.concat([header, Buffer.from(encodeMulaw(tone(20, 1000)))]), port, '127.0.0.1');
        await wait(20);
      }
      socket.close();
      await wait(200);
      return frames.filter((f) => peak(f) > 4000).length;
    };
    // 127.0.0.2 is loopback too, but not the address SIPp's SDP answer gave.
    expect(await blast('127.0.0.2')).toBe(0);
    expect(await blast('127.0.0.1')).toBeGreaterThanOrEqual(20);
    await leg.close();
    expect((await sipp.exited).code).toBe(0);
  }, 30_000);

  test('an answered call rings, goes in_progress, carries our PCMU audio both ways (SIPp echoes it), and our hang-up sends a BYE SIPp accepts', async () => {
    sipp = await startSipp({ scenario: 'answer-wait-bye', rtpEcho: true });
    const { leg, progress, frames } = await dial(telephony(sipp));
    expect(progress).toEqual(['ringing', 'in_progress']);
    expect((leg as RtpLeg).payloadType).toBe(0);
    await wait(300);
    leg.play(tone(1000, 440));
    await wait(1600);
    await leg.close();
    // The line carries silence between turns (our keep-alive echoed), then our 440 Hz tone, about a second of it.
    const loud = frames.filter((f) => peak(f) > 4000);
    expect(loud.length).toBeGreaterThanOrEqual(45);
    expect(loud.length).toBeLessThanOrEqual(52);
    for (const f of loud.slice(1, -1)) expect(Math.abs(frequency(f) - 440)).toBeLessThan(30);
    expect(frames.slice(0, 10).every((f) => peak(f) < 100)).toBe(true);
    await expect(leg.ended).resolves.toBe('closed');
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    expect(done.trace).toMatch(/BYE sip:callee@127\.0\.0\.1:\d+;transport=UDP SIP\/2\.0/i);
  }, 30_000);

  test('audio SIPp sends reaches the leg (its silence after, sent as no RTP, heard as silence frames), and SIPp hanging up (its BYE) ends the leg remote_hung_up', async () => {
    const audio = writeMulawFile(encodeMulaw(tone(1200, 1000)));
    sipp = await startSipp({ scenario: 'answer-hang-up', fields: { MEDIA: `<nop><action><exec rtp_stream="${audio},1,0"/></action></nop>`, HANGUP_MS: '2400' } });
    const { leg, frames } = await dial(telephony(sipp));
    const answered = Date.now();
    await expect(leg.ended).resolves.toBe('remote_hung_up');
    const talked = Date.now() - answered;
    await leg.close();
    const loud = frames.filter((f) => peak(f) > 4000);
    expect(loud.length).toBeGreaterThanOrEqual(55);
    for (const f of loud.slice(1, -1)) expect(Math.abs(frequency(f) - 1000)).toBeLessThan(30);
    // After its 1.2 s stream SIPp sends nothing; the leg still delivers a frame per 20 ms (the gap less 100 ms).
    const after = frames.slice(frames.indexOf(loud.at(-1)!) + 1);
    expect(after.every((f) => peak(f) === 0)).toBe(true);
    expect(after.length * 20).toBeGreaterThan(talked - 1200 - 400);
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    // We answered its BYE and sent none of our own: the one BYE in the trace is SIPp's.
    expect(done.trace.match(/^BYE /gm)).toHaveLength(1);
    expect(done.trace).toMatch(/^BYE sip:concierge@/m);
  }, 30_000);

  test('a far end that answers with PCMA gets A-law both ways', async () => {
    const audio = writeMulawFile(encodeAlaw(tone(600, 1000)));
    sipp = await startSipp({ scenario: 'answer-wait-bye', fields: { CODEC: '8', MEDIA: `<nop><action><exec rtp_stream="${audio},1,8"/></action></nop>` }, rtpEcho: true });
    const { leg, frames } = await dial(telephony(sipp));
    expect((leg as RtpLeg).payloadType).toBe(8);
    await wait(1000);
    leg.play(tone(600, 440));
    await wait(1200);
    await leg.close();
    const loud = frames.filter((f) => peak(f) > 4000);
    // Its 1 kHz stream, and our 440 Hz tone echoed: both decoded right only if both sides speak A-law.
    expect(loud.filter((f) => Math.abs(frequency(f) - 1000) < 30).length).toBeGreaterThanOrEqual(25);
    expect(loud.filter((f) => Math.abs(frequency(f) - 440) < 30).length).toBeGreaterThanOrEqual(25);
    expect((await sipp.exited).code).toBe(0);
  }, 30_000);

  test("the far end's session refresh (a re-INVITE without SDP) is answered 200 with our unchanged SDP; the call carries on until its BYE", async () => {
    sipp = await startSipp({ scenario: 'reinvite', fields: { HANGUP_MS: '800' } });
    const { leg } = await dial(telephony(sipp));
    const ended = await leg.ended;
    await leg.close();
    expect(ended).toBe('remote_hung_up');
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    expect(done.trace.match(/^SIP\/2\.0 200 OK[\s\S]*?CSeq: 1 INVITE[\s\S]*?m=audio \d+ RTP\/AVP 0 8/m)).not.toBeNull();
  }, 30_000);

  test('a blind transfer: REFER with Refer-To <sip:+1…@trunk> and Referred-By, 202 Accepted, NOTIFY sipfrag 100 then 200 (each answered 200), then our BYE; the leg ends transferred', async () => {
    sipp = await startSipp({ scenario: 'refer', fields: { SIPFRAG: '200 OK' } });
    const { leg } = await dial(telephony(sipp));
    const result = await leg.transfer!('+14155550199');
    expect(result).toEqual({ ok: true, status: 200, reason: 'OK' });
    await expect(leg.ended).resolves.toBe('transferred');
    await leg.close();
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    const refer = done.trace.slice(done.trace.indexOf('REFER sip:'));
    expect(refer).toMatch(/^REFER sip:callee@127\.0\.0\.1:\d+;transport=UDP SIP\/2\.0/i);
    expect(refer).toMatch(new RegExp(`^Refer-To: <sip:\\+14155550199@127\\.0\\.0\\.1:${sipp.port}>\r?$`, 'm'));
    expect(refer).toMatch(/^Referred-By: <sip:\+14155550100@127\.0\.0\.1:\d+>\r?$/m);
    // Our 200s to both NOTIFYs, then the BYE, in that order.
    const after = done.trace.slice(done.trace.indexOf('SIP/2.0 202 Accepted'));
    expect(after.match(/^SIP\/2\.0 200 OK[\s\S]*?CSeq: [12] NOTIFY/gm)).toHaveLength(2);
    expect(after.indexOf('CSeq: 2 NOTIFY')).toBeLessThan(after.search(/^BYE /m));
  }, 30_000);

  test("a transfer the target does not answer (sipfrag 486 Busy Here) is reported and leaves the call up; an invalid target is refused before any REFER", async () => {
    sipp = await startSipp({ scenario: 'refer', fields: { SIPFRAG: '486 Busy Here' } });
    const { leg } = await dial(telephony(sipp));
    await expect(leg.transfer!('sip:evil@example.com')).rejects.toThrow('E.164');
    // The agent's transfer_call notice: the REFER goes out, the failure is told to the model, the call stays up.
    const told: string[] = [];
    const did = await carryOutPhoneControl(leg, { k: 'transfer', target: '204' }, { spoken: async () => undefined, tell: (t) => told.push(t), log: console });
    expect(did).toBe('transfer failed: 486 Busy Here');
    expect(told).toEqual(['(the transfer did not go through: 486 Busy Here; the caller is still on the line with you)']);
    expect(await Promise.race([leg.ended, wait(300).then(() => 'still up')])).toBe('still up');
    await leg.close();
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    expect(done.trace.match(/^REFER /gm)).toHaveLength(1);
    expect(done.trace).toMatch(new RegExp(`^Refer-To: <sip:204@127\\.0\\.0\\.1:${sipp.port}>\r?$`, 'm'));
  }, 30_000);

  test('DTMF both ways (RFC 4733): keys the far end presses arrive once each as digits; our digits leave as telephone-events with the answer\'s payload type', async () => {
    const peer = dgram.createSocket('udp4');
    await new Promise<void>((r) => peer.bind(0, '127.0.0.1', () => r()));
    const events: Array<{ pt: number; ts: number; marker: boolean; event: number; end: boolean; duration: number }> = [];
    let ourRtp = 0;
    peer.on('message', (buf, from) => {
      ourRtp = from.port;
      const p = RtpPacket.deSerialize(buf);
      if (p.header.payloadType === 101) {
        const e = decodeTelephoneEvent(p.payload)!;
        events.push({ pt: 101, ts: p.header.timestamp, marker: p.header.marker, event: e.event, end: e.end, duration: e.duration });
      }
    });
    sipp = await startSipp({ scenario: 'answer-dtmf', fields: { MEDIA_PORT: String(peer.address().port) } });
    const { leg } = await dial(telephony(sipp));
    const digits: string[] = [];
    leg.onDigit!((d) => digits.push(d));
    // What the agent is told: the run of keys as one text turn, once # ends it.
    const told: string[] = [];
    keypadTurns(leg, (t) => told.push(t), 5000);
    // The far end presses 1, 0, # : each press as an update every 20 ms then its end three times, one timestamp per press.
    let seq = 100;
    let ts = 5000;
    while (!ourRtp) await wait(20);
    for (const key of ['1', '0', '#']) {
      for (const e of telephoneEventPackets(key, { durationMs: 100 })) {
        const header = new RtpHeader({ payloadType: 101, sequenceNumber: seq++, timestamp: ts, ssrc: 42, marker: false });
        peer.send(new RtpPacket(header, encodeTelephoneEvent(e)).serialize(), ourRtp, '127.0.0.1');
        await wait(e.end ? 1 : 20);
      }
      ts += 2000;
      await wait(60);
    }
    await wait(200);
    expect(digits).toEqual(['1', '0', '#']);
    expect(told).toEqual(['(the caller pressed 1 0 #)']);
    // The agent's send_digits notice, carried out on the leg once its reply was said.
    let spoken = false;
    const did = await carryOutPhoneControl(leg, { k: 'dtmf', digits: '2*9' }, { spoken: async () => void (spoken = true), tell: () => undefined, log: console });
    expect([spoken, did]).toEqual([true, 'sent 2*9']);
    await leg.close();
    peer.close();
    expect((await sipp.exited).code).toBe(0);
    // Three presses, each one timestamp, its first packet marked, ending with three end packets of 160 ms (1280 samples).
    const presses = [...new Set(events.map((e) => e.ts))];
    expect(presses).toHaveLength(3);
    expect(presses.map((t) => events.find((e) => e.ts === t)!.event)).toEqual([2, 10, 9]);
    for (const t of presses) {
      const of = events.filter((e) => e.ts === t);
      expect(of[0].marker).toBe(true);
      expect(of.slice(1).every((e) => !e.marker)).toBe(true);
      expect(of.filter((e) => e.end).map((e) => e.duration)).toEqual([1280, 1280, 1280]);
      expect(of.filter((e) => !e.end).length).toBeGreaterThanOrEqual(6);
    }
    await expect(leg.sendDigits!('12')).rejects.toThrow('the call is over');
  }, 30_000);

  test('a far end that takes no telephone-event: sending digits is refused', async () => {
    sipp = await startSipp({ scenario: 'answer-wait-bye' });
    const { leg } = await dial(telephony(sipp));
    await expect(leg.sendDigits!('1')).rejects.toThrow('telephone-event');
    await expect(leg.sendDigits!('x')).rejects.toThrow();
    await leg.close();
    expect((await sipp.exited).code).toBe(0);
  }, 30_000);

  /** SIPp answers and plays `pcm` (μ-law RTP); our RTP goes to a tap that keeps each loud frame's arrival time. */
  async function screened(pcm: Int16Array, settings: Parameters<typeof screenAnsweredCall>[1]) {
    const tap = dgram.createSocket('udp4');
    await new Promise<void>((r) => tap.bind(0, '127.0.0.1', () => r()));
    const loudAt: Array<{ at: number; hz: number }> = [];
    tap.on('message', (buf) => {
      const p = RtpPacket.deSerialize(buf);
      if (p.header.payloadType !== 0) return;
      const f = decodeMulaw(p.payload);
      if (peak(f) > 4000) loudAt.push({ at: Date.now(), hz: frequency(f) });
    });
    const audio = writeMulawFile(encodeMulaw(pcm));
    sipp = await startSipp({ scenario: 'answer-dtmf', fields: { MEDIA_PORT: String(tap.address().port), MEDIA: `<nop><action><exec rtp_stream="${audio},1,0"/></action></nop>` } });
    const { leg } = await dial(telephony(sipp));
    const answered = Date.now();
    const spoken: string[] = [];
    const result = await screenAnsweredCall(leg, settings, async (text) => {
      spoken.push(text);
      return tone(1000, 440);
    });
    const doneAt = Date.now() - answered;
    await leg.close();
    tap.close();
    expect((await sipp.exited).code).toBe(0);
    return { result, spoken, doneAt, message: loudAt.filter((l) => Math.abs(l.hz - 440) < 30).map((l) => l.at - answered) };
  }

  const greeting = () => spokenPcm("Hi, you've reached Sam and Alex. We can't come to the phone right now, so please leave your name and number after the tone.");
  const beep = () => tone(500, 1000);
  const quiet = (ms: number) => new Int16Array(ms * 8);
  const concat = (...parts: Int16Array[]) => Int16Array.from(parts.flatMap((p) => [...p]));

  test("answering-machine detection on the line: a recorded greeting then a beep is a machine; leave_message plays the message after the beep, then the call ends", async () => {
    const g = greeting();
    const beepEndsMs = 300 + (g.length / 8) + 400 + 500;
    const { result, spoken, message } = await screened(concat(quiet(300), g, quiet(400), beep(), quiet(3000)), { answering_machine: 'leave_message', voicemail_message: 'This is Acme calling about your order.' });
    expect(result.decision.answeredBy).toBe('machine');
    expect(result.next).toBe('message_left');
    expect(spoken).toEqual(['This is Acme calling about your order.']);
    // The whole message reached the far end, and none of it before the beep was over.
    expect(message.length).toBeGreaterThanOrEqual(45);
    expect(message[0]).toBeGreaterThanOrEqual(beepEndsMs);
  }, 45_000);

  test('a machine with hang_up: the call ends at the decision, nothing said; a person\'s "Hello?" then silence goes to the agent (converse)', async () => {
    const machine = await screened(concat(quiet(300), greeting(), quiet(2000)), { answering_machine: 'hang_up' });
    expect(machine.result).toMatchObject({ decision: { answeredBy: 'machine' }, next: 'hang_up' });
    expect(machine.spoken).toEqual([]);
    expect(machine.message).toEqual([]);
    expect(machine.doneAt).toBeLessThan(300 + 2500 + 2000);
    sipp = null;
    const person = await screened(concat(quiet(300), spokenPcm('Hello?'), quiet(4000)), { answering_machine: 'leave_message', voicemail_message: 'unused' });
    expect(person.result).toMatchObject({ decision: { answeredBy: 'human' }, next: 'converse' });
    expect(person.spoken).toEqual([]);
  }, 45_000);

  test('486 Busy Here ends the dial busy (and is ACKed)', async () => {
    sipp = await startSipp({ scenario: 'busy' });
    const progress: string[] = [];
    const err = await failure(telephony(sipp).dial(input, (s) => progress.push(s), new AbortController().signal));
    expect(err).toBeInstanceOf(DialFailed);
    expect(err).toMatchObject({ status: 'busy', sipStatusCode: 486, message: 'SIP 486 Busy Here' });
    expect(progress).toEqual([]);
    expect((await sipp.exited).code).toBe(0);
  }, 30_000);

  test('no answer within the ringing timeout: CANCEL, 487 ACKed, the dial ends no_answer', async () => {
    sipp = await startSipp({ scenario: 'no-answer' });
    const progress: string[] = [];
    const started = Date.now();
    const err = await failure(telephony(sipp, { ringingTimeoutSeconds: 1 }).dial(input, (s) => progress.push(s), new AbortController().signal));
    expect(err).toBeInstanceOf(DialFailed);
    expect(err).toMatchObject({ status: 'no_answer', message: 'not answered within 1 s' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(progress).toEqual(['ringing']);
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    expect(done.trace).toMatch(/^CANCEL sip:\+14155550123@127\.0\.0\.1:\d+ SIP\/2\.0/m);
  }, 30_000);

  test('aborting while it rings sends CANCEL and rejects with the abort', async () => {
    sipp = await startSipp({ scenario: 'no-answer' });
    const ctl = new AbortController();
    const dialing = failure(telephony(sipp).dial(input, (s) => s === 'ringing' && setTimeout(() => ctl.abort(new Error('hung up by the agent')), 300), ctl.signal));
    expect(await dialing).toMatchObject({ message: 'hung up by the agent' });
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    expect(done.trace).toMatch(/^CANCEL /m);
  }, 30_000);

  test('a 401 digest challenge is answered with the credentials (SIPp verifies them); the password never goes on the wire', async () => {
    const password = 's3cret-trunk-pass';
    sipp = await startSipp({ scenario: 'auth', fields: { USERNAME: 'acme', PASSWORD: password } });
    const { leg, progress } = await dial(telephony(sipp, { username: 'acme', password }));
    expect(progress).toEqual(['ringing', 'in_progress']);
    await leg.close();
    const done = await sipp.exited;
    expect(done.code).toBe(0);
    expect(done.trace).toMatch(/Authorization: Digest username="acme", realm="trunk\.test"/);
    expect(done.trace).not.toContain(password);
  }, 30_000);

  test('wrong credentials: the far end refuses (403) and the dial ends failed', async () => {
    sipp = await startSipp({ scenario: 'auth', fields: { USERNAME: 'acme', PASSWORD: 'the-right-one' } });
    const err = await failure(telephony(sipp, { username: 'acme', password: 'a-wrong-one' }).dial(input, () => undefined, new AbortController().signal));
    expect(err).toMatchObject({ status: 'failed', sipStatusCode: 403, message: 'SIP 403 Forbidden' });
  }, 30_000);
});

describe('direct SIP trunk: retransmission over UDP', () => {
  test('an INVITE nobody answers is retransmitted per Timer A (T1 doubling) and given up at Timer B (64·T1) as failed', async () => {
    const silent = dgram.createSocket('udp4');
    await new Promise<void>((r) => silent.bind(0, '127.0.0.1', () => r()));
    const seen: Array<{ at: number; branch: string }> = [];
    silent.on('message', (buf) => {
      const msg = parseMessage(buf);
      if (msg?.method === 'INVITE') seen.push({ at: Date.now(), branch: /branch=([^;\s]+)/.exec(buf.toString())![1] });
    });
    const t = new SipTrunkTelephony({ uri: `sip:127.0.0.1:${silent.address().port}`, fromNumber: FROM, t1Ms: 50 });
    const started = Date.now();
    const err = await failure(t.dial(input, () => undefined, new AbortController().signal));
    silent.close();
    expect(err).toMatchObject({ status: 'failed', message: expect.stringContaining('did not respond') });
    // Timer B: 64 × 50 ms.
    expect(Date.now() - started).toBeGreaterThanOrEqual(3200);
    // Sent at 0, 50, 150, 350, 750, 1550 ms (and 3150): one transaction, one branch.
    expect(seen.length).toBeGreaterThanOrEqual(6);
    expect(new Set(seen.map((s) => s.branch)).size).toBe(1);
    // Retransmission k is sent T1·(2^k − 1) after the first at the earliest (timers never fire early), and the first
    // after the dial began: measured from the dial's start, a listener that reads late can only add time, so the bound
    // needs no slack for load (1 ms for the clock's rounding). Per-gap bounds would: a late read shortens the next gap.
    seen.forEach((s, k) => expect(s.at - started).toBeGreaterThanOrEqual(50 * (2 ** k - 1) - 1));
    const gaps = seen.slice(1).map((s, i) => s.at - seen[i].at);
    expect(gaps[4]).toBeLessThan(1200);
  }, 15_000);
});
