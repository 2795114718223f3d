import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { Agent, Call } from '../../db/entities';
import type { SpeechSynthesizer } from '../ports/speech';
import { ConversationRepository } from '../conversations/repository';
import { AnsweringMachineDetector, BeepDetector, type AmdDecision, type AnsweredBy } from '../../lib/audio/amd';
import { Vad } from '../../lib/audio/vad';
import { OperationalError } from '../../lib/failures';
import { FRAME_MS, MEDIA_RATE } from '../ports/voice';
import type { VoiceMedia } from './media';
import type { VoiceSessionService } from './sessions';
import type { CallEnd, MediaLeg, Telephony } from '../ports/voice';

export interface PhoneCallInput {
  callId: string;
  workspaceId: string;
  conversationId: string;
  /** E.164. */
  phone: string;
}

/** How a call ended: its terminal status and why (the hang-up reason, or the dial's failure). */
export interface CallOutcome {
  status: CallEnd;
  reason: string;
  error?: string;
  /** Who answered, when the agent screens for answering machines (its phone.answering_machine is not off). */
  answeredBy?: AnsweredBy;
}

/** The agent's phone settings that matter once a call is answered (AgentSpec.phone). */
export interface ScreeningSettings {
  answering_machine: 'off' | 'hang_up' | 'leave_message';
  voicemail_message?: string;
}

/**
 * Answering-machine screening of a call (wired by the worker; absent: every call goes
 * straight to the agent): the agent's settings for the call, speech synthesis of the
 * voicemail message, and where the outcome is recorded.
 */
export interface CallScreening {
  settings(input: PhoneCallInput): Promise<ScreeningSettings | null>;
  /** `text` as MEDIA_RATE audio. */
  speak(text: string): Promise<Int16Array>;
  /** Records who answered on the call (and why the detector thinks so). */
  record(input: PhoneCallInput, decision: AmdDecision): Promise<void>;
}

/** The timeline event that records who answered an outbound call (GET /api/v1/conversations/{id}/events). */
export const ANSWERED_BY_EVENT = 'call.answered_by';

/**
 * The worker's CallScreening: the settings are the phone block of the call's agent
 * (AgentSpec.phone; none: no screening), the message is spoken by the voice's TTS, and
 * the outcome is the call's `answered_by` and goes on the conversation's timeline as
 * `call.answered_by` `{call_id, answered_by, reason, at_ms}`.
 */
export function callScreening(em: EntityManager, tts: SpeechSynthesizer, conversations = new ConversationRepository()): CallScreening {
  return {
    async settings(input) {
      const fork = em.fork();
      const call = await fork.findOne(Call, { id: input.callId });
      const agent = call ? await fork.findOne(Agent, { id: call.agentId, workspaceId: input.workspaceId }) : null;
      const phone = agent?.spec.phone;
      return phone ? { answering_machine: phone.answering_machine, voicemail_message: phone.voicemail_message } : null;
    },
    speak: (text) => tts.synthesize(text),
    async record(input, d) {
      await em.fork().nativeUpdate(Call, { id: input.callId }, { answeredBy: d.answeredBy });
      await conversations.addConversationEvent(em.fork(), input.conversationId, ANSWERED_BY_EVENT, { call_id: input.callId, answered_by: d.answeredBy, reason: d.reason, at_ms: d.atMs });
    },
  };
}

export interface ScreenResult {
  decision: AmdDecision;
  /** converse: a person (or no telling): the agent talks; hang_up / message_left: the call ends here. */
  next: 'converse' | 'hang_up' | 'message_left';
}

/** Longest wait for a machine's beep (or the end of its greeting) before the message is left anyway. */
const BEEP_WAIT_MS = 20_000;
/** A machine's greeting followed by this much silence and no beep: it records now. */
const AFTER_GREETING_SILENCE_MS = 1500;

/**
 * The first seconds of an answered outbound call: who answered (AnsweringMachineDetector)
 * and, for a machine, what the agent's settings say: hang_up, or leave_message — wait for
 * the beep (or, for machines without one, 1.5 s of silence after the greeting; 20 s at
 * most), play the message, and end once it has been sent. A person, or no telling
 * (unknown), goes to the agent. The leg ending during screening ends it.
 */
export async function screenAnsweredCall(
  leg: MediaLeg,
  settings: ScreeningSettings,
  speak: (text: string) => Promise<Int16Array>,
  opts: { detector?: AnsweringMachineDetector } = {},
): Promise<ScreenResult & { ended?: string }> {
  const detector = opts.detector ?? new AnsweringMachineDetector();
  let listening: ((frame: Int16Array) => void) | null = null;
  leg.onAudio((frame) => listening?.(frame));
  const ended = leg.ended.then((reason) => ({ ended: reason }));
  const decided = await Promise.race([
    new Promise<AmdDecision>((resolve) => {
      listening = (frame) => {
        const d = detector.push(frame);
        if (d) {
          listening = null;
          resolve(d);
        }
      };
    }),
    ended,
  ]);
  listening = null;
  if ('ended' in decided) return { decision: { answeredBy: 'unknown', reason: 'the call ended during screening', atMs: 0 }, next: 'hang_up', ended: decided.ended };
  const decision = decided;
  if (decision.answeredBy !== 'machine' || settings.answering_machine === 'off') return { decision, next: 'converse' };
  if (settings.answering_machine === 'hang_up' || !settings.voicemail_message) return { decision, next: 'hang_up' };

  const message = speak(settings.voicemail_message);
  // A beep already heard (the detector's reason) is the cue; otherwise listen for it, or for the greeting's end.
  if (!/beep/.test(decision.reason)) {
    const beep = new BeepDetector();
    const vad = new Vad({ sampleRate: MEDIA_RATE, silenceMs: AFTER_GREETING_SILENCE_MS });
    // Quiet from the start (the greeting may have ended as the detector decided), until speech resumes.
    let quietSince: number | null = 0;
    let heard = 0;
    const cue = await Promise.race([
      new Promise<'beep' | 'silence' | 'timeout'>((resolve) => {
        listening = (frame) => {
          heard += FRAME_MS;
          if (beep.push(frame)) return resolve('beep');
          for (const e of vad.push(frame)) quietSince = e.type === 'speech_end' ? (e.sample / MEDIA_RATE) * 1000 : null;
          if (quietSince !== null && heard - quietSince >= AFTER_GREETING_SILENCE_MS) resolve('silence');
          if (heard >= BEEP_WAIT_MS) resolve('timeout');
        };
      }),
      ended,
    ]);
    listening = null;
    if (typeof cue !== 'string') return { decision, next: 'hang_up', ended: cue.ended };
  }
  leg.play(await message);
  const over = await Promise.race([
    (async () => {
      while (leg.playing) await new Promise((r) => setTimeout(r, FRAME_MS));
      // The last frames leave on the 20 ms clock.
      await new Promise((r) => setTimeout(r, 100));
      return null;
    })(),
    ended,
  ]);
  return over ? { decision, next: 'message_left', ended: over.ended } : { decision, next: 'message_left' };
}

/** The failure a dial reports when it ends unanswered with a status of its own (busy, no answer): domain/ports/voice.ts DialFailed. */
interface DialFailure {
  status: Exclude<CallEnd, 'completed'>;
  message: string;
}
const isDialFailure = (err: unknown): err is DialFailure =>
  err instanceof OperationalError && err.code === 'DialFailed' && typeof (err as unknown as DialFailure).status === 'string';

/**
 * One dial-out call on the worker: dials through the telephony (the row follows its
 * progress, ringing then in_progress), then runs the voice agent on the answered leg
 * until either side hangs up. The row's terminal status is written the moment the call
 * ends (so its duration is the talk time, not the recording's save): busy / no_answer /
 * failed from the dial, completed once answered. `signal` aborting hangs up (before the
 * answer: the dial is abandoned and the call is `failed`, "cancelled").
 */
export async function runPhoneCall(
  deps: { telephony: Telephony | null; media: VoiceMedia; sessions: VoiceSessionService; log: Logger; screening?: CallScreening },
  input: PhoneCallInput,
  signal: AbortSignal,
  heartbeat: (details: unknown) => void,
): Promise<CallOutcome> {
  const id = input.callId;
  const end = async (outcome: CallOutcome): Promise<CallOutcome> => {
    await deps.sessions.callStatus(id, outcome.status, outcome.error ? { error: outcome.error } : {});
    return outcome;
  };
  if (!deps.telephony) return end({ status: 'failed', reason: 'no_telephony', error: 'no voice provider with an outbound number is configured on this worker' });
  // Progress is reported synchronously; the row's updates run in order behind it.
  let progressed = Promise.resolve();
  const progress = (status: 'ringing' | 'in_progress') => {
    heartbeat({ phase: status });
    progressed = progressed.then(() => deps.sessions.callStatus(id, status)).catch((err) => deps.log.warn({ err, id, status }, 'call status not recorded'));
  };
  const beat = setInterval(() => heartbeat({ phase: 'dialing' }), 2000);
  let leg: MediaLeg;
  try {
    leg = await deps.telephony.dial({ callId: id, workspaceId: input.workspaceId, to: input.phone, room_name: id }, progress, signal);
  } catch (err) {
    await progressed;
    if (signal.aborted) return end({ status: 'failed', reason: 'cancelled', error: 'hung up before the call was answered' });
    if (isDialFailure(err)) return end({ status: err.status, reason: err.status, error: err.message });
    deps.log.warn({ err, id }, 'dial-out failed');
    return end({ status: 'failed', reason: 'dial_failed', error: err instanceof Error ? err.message : String(err) });
  } finally {
    clearInterval(beat);
  }
  await progressed;
  // A telephony that connects without reporting the answer still has a connected leg.
  await deps.sessions.callStatus(id, 'in_progress');
  let answeredBy: AnsweredBy | undefined;
  const settings = deps.screening ? await deps.screening.settings(input).catch((err: unknown) => (deps.log.warn({ err, id }, 'phone settings not read: the call is not screened'), null)) : null;
  if (deps.screening && settings && settings.answering_machine !== 'off') {
    const screened = await screenAnsweredCall(leg, settings, (text) => deps.screening!.speak(text));
    answeredBy = screened.decision.answeredBy;
    await deps.screening.record(input, screened.decision).catch((err: unknown) => deps.log.warn({ err, id }, 'answering-machine outcome not recorded'));
    if (screened.next !== 'converse') {
      await leg.close();
      const reason = screened.ended ?? (screened.next === 'message_left' ? 'voicemail_left' : 'answering_machine');
      return end({ status: 'completed', reason, answeredBy });
    }
  }
  const reason = await deps.media.converse(id, leg, { id: input.conversationId, workspaceId: input.workspaceId }, signal, heartbeat);
  return end({ status: 'completed', reason, ...(answeredBy ? { answeredBy } : {}) });
}

/** Quiet after a key press that ends a run of keys (a caller typing a number pauses less). */
const KEYPAD_GAP_MS = 1200;

/**
 * The keys a caller presses, as text turns for the agent: presses a short gap apart are
 * one entry (an account number, a menu choice), told once `#` is pressed or after
 * `gapMs` of no key, as "(the caller pressed 4 2 #)". No-op on a leg without a keypad.
 * The media activity hands `say` to VoiceAgent.inject, so the model hears the keys as
 * the caller's turn.
 */
export function keypadTurns(leg: MediaLeg, say: (text: string) => void, gapMs = KEYPAD_GAP_MS): void {
  if (!leg.onDigit) return;
  let keys: string[] = [];
  let timer: NodeJS.Timeout | null = null;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (keys.length) say(`(the caller pressed ${keys.join(' ')})`);
    keys = [];
  };
  leg.onDigit((digit) => {
    keys.push(digit);
    if (timer) clearTimeout(timer);
    if (digit === '#') flush();
    else timer = setTimeout(flush, gapMs);
  });
  void leg.ended.then(flush);
}

/** A control notice for a live call's leg (transfer_call, send_digits: domain/chat/tools/phone.ts). */
export type PhoneControl = { k: 'transfer'; target: string } | { k: 'dtmf'; digits: string };

/**
 * Carries out a phone control notice on the call's leg, after `spoken()` (the agent's
 * reply in progress has been said: "I'm transferring you now" comes before the REFER).
 * A transfer that fails leaves the call up and `tell`s the model (a text turn, as
 * VoiceAgent.inject, so it explains to the caller); digits that cannot be sent are
 * logged. What it did, for the media activity's log.
 */
export async function carryOutPhoneControl(
  leg: MediaLeg,
  notice: PhoneControl,
  o: { spoken: () => Promise<void>; tell: (text: string) => void; log: Pick<Logger, 'warn'> },
): Promise<string> {
  await o.spoken();
  if (notice.k === 'dtmf') {
    if (!leg.sendDigits) return 'no keypad on this leg';
    return leg.sendDigits(notice.digits).then(
      () => `sent ${notice.digits}`,
      (err: unknown) => {
        o.log.warn({ err }, 'digits not sent');
        return `digits not sent: ${err instanceof Error ? err.message : String(err)}`;
      },
    );
  }
  if (!leg.transfer) {
    o.tell('(the call could not be transferred: this line has no transfer)');
    return 'no transfer on this leg';
  }
  const r = await leg.transfer(notice.target).catch((err: unknown) => ({ ok: false, status: 0, reason: err instanceof Error ? err.message : String(err) }));
  if (!r.ok) o.tell(`(the transfer did not go through${r.status ? `: ${r.status} ${r.reason}` : ''}; the caller is still on the line with you)`);
  return r.ok ? `transferred to ${notice.target}` : `transfer failed: ${r.status} ${r.reason}`.trim();
}
