import { AnsweringMachineDetector, BeepDetector, type AmdDecision } from '../../lib/audio/amd';
import { decodeTelephoneEvent, dtmfDigit, dtmfEvent, dtmfToneDigit, encodeTelephoneEvent, telephoneEventPackets, toneShare } from '../../lib/audio/dtmf';
import { FRAME_SAMPLES, MEDIA_RATE } from '../../domain/ports/voice';
import { spokenPcm } from '../support/test-phone';
import { DEFAULT_DIALABLE_TYPES, type DialOutPolicy } from '../../domain/voice/destinations';
import { checkKeypadDigits, checkTransferTarget } from '../../domain/voice/dial-out';
import { ANSWERED_BY_EVENT, callScreening } from '../../domain/voice/phone-call';
import { Agent, Call, Conversation, ConversationEvent } from '../../db/entities';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';

/**
 * Keypad digits (RFC 4733 payloads, in-band DTMF by Goertzel) and answering-machine
 * detection on recorded speech (espeak-ng): a long greeting, a greeting ending in a beep,
 * a person's short "Hello?".
 */

const sine = (ms: number, ...hz: number[]) => {
  const out = new Int16Array((ms * MEDIA_RATE) / 1000);
  for (let i = 0; i < out.length; i++) out[i] = Math.round(hz.reduce((s, f) => s + (12000 / hz.length) * Math.sin((2 * Math.PI * f * i) / MEDIA_RATE), 0));
  return out;
};
const silence = (ms: number) => new Int16Array((ms * MEDIA_RATE) / 1000);
const join = (...parts: Int16Array[]) => {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
function frames(pcm: Int16Array): Int16Array[] {
  const out: Int16Array[] = [];
  for (let i = 0; i + FRAME_SAMPLES <= pcm.length; i += FRAME_SAMPLES) out.push(pcm.slice(i, i + FRAME_SAMPLES));
  return out;
}
function detect(pcm: Int16Array): AmdDecision | null {
  const d = new AnsweringMachineDetector();
  for (const f of frames(pcm)) {
    const r = d.push(f);
    if (r) return r;
  }
  return null;
}

const GREETING = "Hi, you've reached Sam and Alex. We can't come to the phone right now, so please leave your name and number after the tone and we'll call you back.";

describe('RFC 4733 telephone-events', () => {
  test('the keypad maps to events 0-15 and back; a payload encodes and decodes (end bit, volume, duration)', () => {
    expect([...'0123456789*#ABCD'].map(dtmfEvent)).toEqual([...Array(16).keys()]);
    expect(dtmfEvent('x')).toBe(-1);
    expect(dtmfDigit(11)).toBe('#');
    expect(dtmfDigit(16)).toBeNull();
    const bytes = encodeTelephoneEvent({ event: 9, end: true, volume: 10, duration: 1280 });
    expect([...bytes]).toEqual([9, 0x8a, 0x05, 0x00]);
    expect(decodeTelephoneEvent(bytes)).toEqual({ event: 9, end: true, volume: 10, duration: 1280 });
    expect(decodeTelephoneEvent(new Uint8Array(3))).toBeNull();
  });

  test("a digit's packets: an update every 20 ms with a growing duration, then the end three times", () => {
    const ps = telephoneEventPackets('5', { durationMs: 100 });
    expect(ps.map((p) => [p.duration, p.end])).toEqual([[160, false], [320, false], [480, false], [640, false], [800, true], [800, true], [800, true]]);
    expect(() => telephoneEventPackets('e')).toThrow('not a keypad digit');
  });
});

describe('Goertzel', () => {
  test("a pure tone holds all of a block's energy at its frequency and little 100 Hz away; silence holds none", () => {
    expect(toneShare(sine(20, 1000), 1000, MEDIA_RATE)).toBeGreaterThan(0.95);
    expect(toneShare(sine(20, 1000), 1100, MEDIA_RATE)).toBeLessThan(0.2);
    expect(toneShare(silence(20), 1000, MEDIA_RATE)).toBe(0);
  });

  test('in-band DTMF: each key of the keypad is read from 20 ms of its two tones; speech and a single tone are no digit', () => {
    const low = [697, 770, 852, 941];
    const high = [1209, 1336, 1477, 1633];
    const keys = ['123A', '456B', '789C', '*0#D'];
    for (const [r, l] of low.entries()) for (const [c, h] of high.entries()) expect(dtmfToneDigit(sine(20, l, h), MEDIA_RATE)).toBe(keys[r][c]);
    expect(dtmfToneDigit(sine(20, 1000), MEDIA_RATE)).toBeNull();
    const speech = frames(spokenPcm('Hello, I would like to check my order.'));
    expect(speech.filter((f) => dtmfToneDigit(f, MEDIA_RATE) !== null)).toHaveLength(0);
  });
});

describe('answering-machine detection', () => {
  const greeting = spokenPcm(GREETING);
  test("a machine's long greeting (over 5 s): machine, once it has talked 2.5 s without a pause", () => {
    expect(greeting.length / MEDIA_RATE).toBeGreaterThan(5);
    const d = detect(join(silence(400), greeting, silence(3000)))!;
    expect(d).toMatchObject({ answeredBy: 'machine', reason: expect.stringContaining('without a pause') });
    expect(d.atMs).toBeGreaterThanOrEqual(400 + 2500);
    expect(d.atMs).toBeLessThan(400 + 3500);
  });

  test('a person: a short "Hello?" then waiting in silence is human, within a second of the word', () => {
    const hello = spokenPcm('Hello?');
    const d = detect(join(silence(500), hello, silence(3000)))!;
    expect(d.answeredBy).toBe('human');
    expect(d.atMs).toBeLessThan(500 + (hello.length / MEDIA_RATE) * 1000 + 1000);
    // Two short words with a pause are still a person.
    expect(detect(join(silence(300), spokenPcm('Yes?'), silence(400), spokenPcm('Who is it?'), silence(3000)))!.answeredBy).toBe('human');
  });

  test('nothing said: unknown after 4 s (the call goes on as with a person)', () => {
    expect(detect(silence(6000))).toMatchObject({ answeredBy: 'unknown', atMs: 4000 });
  });

  test("a short greeting cut by a beep is a machine by its beep; the beep's end is reported at the frame after it", () => {
    const d = detect(join(silence(300), spokenPcm('Leave a message.'), silence(300), sine(400, 1000), silence(1000)))!;
    expect(d).toMatchObject({ answeredBy: 'machine', reason: 'a 1000 Hz beep' });
    const beep = new BeepDetector();
    const fs = frames(join(silence(200), sine(300, 850), silence(200)));
    const at = fs.findIndex((f) => beep.push(f));
    expect(at).toBe(10 + 15);
    // Speech is no beep, nor a tone too short to be one.
    const quiet = new BeepDetector();
    expect(frames(join(greeting, sine(60, 1000), silence(100))).some((f) => quiet.push(f))).toBe(false);
  });
});

describe('the destination policy for transfer targets and keypad numbers', () => {
  const policy: DialOutPolicy = { countries: ['US', 'GB'], types: DEFAULT_DIALABLE_TYPES };

  test('a transfer target: an extension goes as it is; a number must pass the policy as a dial-out number', () => {
    expect(checkTransferTarget('204', policy)).toBe('204');
    expect(checkTransferTarget('+1 415 555 0199', policy)).toBe('+14155550199');
    expect(() => checkTransferTarget('+19005550123', policy)).toThrow('premium-rate');
    expect(() => checkTransferTarget('+33142685300', policy)).toThrow('a country this workspace does not allow');
    expect(() => checkTransferTarget('4155550199', policy)).toThrow('E.164');
  });

  test('keypad digits: menu choices and extensions go as they are; a run of 7+ digits is a number and must pass the policy', () => {
    expect(checkKeypadDigits('1', policy, '+14155550123')).toBe('1');
    expect(checkKeypadDigits('2#204*', policy, '+14155550123')).toBe('2#204*');
    // The called number's country reads a national number; the international form reads with its country code.
    expect(checkKeypadDigits('9#4155550199#', policy, '+14155550123')).toBe('9#4155550199#');
    expect(checkKeypadDigits('442079460000', policy, '+14155550123')).toBe('442079460000');
    expect(() => checkKeypadDigits('9#9005550123#', policy, '+14155550123')).toThrow(/keypad digits 9005550123 read as a number: .*premium-rate/);
    expect(() => checkKeypadDigits('0033142685300', policy, '+14155550123')).toThrow('keypad digits 0033142685300');
    expect(() => checkKeypadDigits('12x', policy, '+14155550123')).toThrow('0-9');
  });
});

describe("call screening on the database: the agent's phone settings in, who answered out", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  test("settings come from the call's agent (none: not screened); the outcome is the call's answered_by and a call.answered_by event", async () => {
    const ws = await createWorkspace(db.orm);
    const em = db.orm.em.fork();
    const spec = { name: 'Caller', phone: { transfer_targets: [], answering_machine: 'leave_message', voicemail_message: 'Call us back.' } };
    em.create(Agent, { id: 'agt_phone', workspaceId: ws, name: 'Caller', status: 'published', spec: spec as never });
    em.create(Agent, { id: 'agt_plain', workspaceId: ws, name: 'Plain', status: 'published', spec: { name: 'Plain' } as never });
    // Rows in the order of their foreign keys (the entities name ids, not relations).
    await em.flush();
    em.create(Conversation, { id: 'conv_phone', workspaceId: ws, agentId: 'agt_phone', channel: 'voice', status: 'open' });
    await em.flush();
    const call = (id: string, agentId: string) => em.create(Call, { id, workspaceId: ws, conversationId: 'conv_phone', agentId, phone: '+14155550123', provider: 'sip', status: 'in_progress' });
    call('call_phone', 'agt_phone');
    call('call_plain', 'agt_plain');
    await em.flush();
    const spoken: string[] = [];
    const screening = callScreening(db.orm.em, { synthesize: async (t) => (spoken.push(t), new Int16Array(8)) });
    const input = { callId: 'call_phone', workspaceId: ws, conversationId: 'conv_phone', phone: '+14155550123' };
    expect(await screening.settings(input)).toEqual({ answering_machine: 'leave_message', voicemail_message: 'Call us back.' });
    expect(await screening.settings({ ...input, callId: 'call_plain' })).toBeNull();
    await screening.speak('Call us back.');
    expect(spoken).toEqual(['Call us back.']);
    await screening.record(input, { answeredBy: 'machine', reason: 'a 1000 Hz beep', atMs: 3400 });
    const row = await db.orm.em.fork().findOneOrFail(Call, { id: 'call_phone' });
    expect(row.answeredBy).toBe('machine');
    expect((await db.orm.em.fork().findOneOrFail(Call, { id: 'call_plain' })).answeredBy).toBeNull();
    const events = await db.orm.em.fork().find(ConversationEvent, { conversationId: 'conv_phone', type: ANSWERED_BY_EVENT });
    expect(events.map((e) => e.data)).toEqual([{ call_id: 'call_phone', answered_by: 'machine', reason: 'a 1000 Hz beep', at_ms: 3400 }]);
  });
});
