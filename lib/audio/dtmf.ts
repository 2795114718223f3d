/**
 * Keypad digits on a phone line: RFC 4733 telephone-events (the digits as RTP packets of
 * their own, what trunks negotiate as telephone-event/8000), and the Goertzel algorithm,
 * which measures one frequency's power in a block of samples for a few multiplications a
 * sample: in-band DTMF tones (ITU-T Q.23/Q.24: one low and one high frequency) and the
 * beep of an answering machine (one steady tone).
 */

/** RFC 4733 §3.2: events 0-9 are the digits, 10 is *, 11 is #, 12-15 are A-D. */
export const DTMF_EVENTS = '0123456789*#ABCD';

/** A keypad digit's event code; -1 when it is not one. */
export function dtmfEvent(digit: string): number {
  return digit.length === 1 ? DTMF_EVENTS.indexOf(digit.toUpperCase()) : -1;
}

/** The digit of an event code; null for the other events (flash, tones of RFC 4734). */
export function dtmfDigit(event: number): string | null {
  return event >= 0 && event < DTMF_EVENTS.length ? DTMF_EVENTS[event] : null;
}

/** A digit string we can send: 1-64 of 0-9 * # A-D. */
export const DTMF_DIGITS = /^[0-9*#A-D]{1,64}$/i;

/** One telephone-event payload (RFC 4733 §2.3): event, end bit, volume (−dBm0, 0-63), duration in timestamp units. */
export interface TelephoneEvent {
  event: number;
  end: boolean;
  volume: number;
  duration: number;
}

export function encodeTelephoneEvent(e: TelephoneEvent): Buffer {
  const out = Buffer.alloc(4);
  out[0] = e.event & 0xff;
  out[1] = (e.end ? 0x80 : 0) | (e.volume & 0x3f);
  out.writeUInt16BE(Math.min(0xffff, e.duration), 2);
  return out;
}

/** A telephone-event payload; null when it is shorter than the 4 bytes of one. */
export function decodeTelephoneEvent(payload: Uint8Array): TelephoneEvent | null {
  if (payload.length < 4) return null;
  return { event: payload[0], end: (payload[1] & 0x80) !== 0, volume: payload[1] & 0x3f, duration: (payload[2] << 8) | payload[3] };
}

/**
 * The power of `hz` in `samples` (Goertzel), normalised by the block's energy: 1 for a
 * pure sine at exactly `hz`, about 0 for a frequency far from it or for silence. A sine
 * between two analysed frequencies loses power as sinc² of its distance in bins
 * (one bin = rate / samples.length).
 */
export function toneShare(samples: Int16Array, hz: number, rate: number): number {
  const n = samples.length;
  let energy = 0;
  for (let i = 0; i < n; i++) energy += samples[i] * samples[i];
  if (energy === 0) return 0;
  return goertzelPower(samples, hz, rate) / ((n * energy) / 2);
}

/** |X(hz)|² of the block (the generalised Goertzel: `hz` need not fall on a DFT bin). */
export function goertzelPower(samples: Int16Array, hz: number, rate: number): number {
  const coeff = 2 * Math.cos((2 * Math.PI * hz) / rate);
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < samples.length; i++) {
    const s0 = samples[i] + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - coeff * s1 * s2;
}

const LOW = [697, 770, 852, 941];
const HIGH = [1209, 1336, 1477, 1633];
const KEYPAD = ['123A', '456B', '789C', '*0#D'];

/**
 * The DTMF digit one block of in-band audio carries (20 ms at 8 kHz or longer), or null:
 * one low and one high frequency each holding a clear share of the block's energy, the
 * two together most of it (speech spreads its energy wider), neither more than 8 dB above
 * the other (Q.24's twist).
 */
export function dtmfToneDigit(samples: Int16Array, rate: number): string | null {
  const low = LOW.map((f) => toneShare(samples, f, rate));
  const high = HIGH.map((f) => toneShare(samples, f, rate));
  const li = low.indexOf(Math.max(...low));
  const hi = high.indexOf(Math.max(...high));
  const [l, h] = [low[li], high[hi]];
  if (l < 0.2 || h < 0.2 || l + h < 0.7) return null;
  if (Math.abs(10 * Math.log10(l / h)) > 8) return null;
  return KEYPAD[li][hi];
}

/** RFC 4733 packets of one digit as a sender paces them: an update every 20 ms, the end three times. */
export function telephoneEventPackets(digit: string, o: { durationMs?: number; volume?: number; rate?: number } = {}): TelephoneEvent[] {
  const event = dtmfEvent(digit);
  if (event < 0) throw new Error(`'${digit}' is not a keypad digit`);
  const rate = o.rate ?? 8000;
  const step = rate / 50;
  const total = Math.round(((o.durationMs ?? 160) * rate) / 1000);
  const volume = o.volume ?? 10;
  const out: TelephoneEvent[] = [];
  for (let d = step; d < total; d += step) out.push({ event, end: false, volume, duration: d });
  for (let i = 0; i < 3; i++) out.push({ event, end: true, volume, duration: total });
  return out;
}
