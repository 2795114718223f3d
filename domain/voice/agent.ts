import type { Logger } from 'pino';
import { concatFrames } from '../../lib/audio/audio';
import type { CallRecorder } from './recorder';
import type { SpeechRecognizer } from '../ports/speech';
import type { SpeechSynthesizer } from '../ports/speech';
import { FRAME_MS, FRAME_SAMPLES, MEDIA_RATE, type MediaLeg, type TranscriptFrame } from '../ports/voice';
import { Vad, type VadEvent, type VadOptions } from '../../lib/audio/vad';
import { SileroVad } from '../../lib/audio/silero-vad';
import {
  BACKCHANNEL_MAX_MS,
  CONFIRM_AFTER_MS,
  INTERRUPT_AFTER_MS,
  isBackchannel,
  OVERLAP_CHECK_MS,
  SMART_TURN_THRESHOLD,
  SMART_TURN_WAIT_MS,
  soundsUnfinished,
  SPECULATE_AFTER_MS,
  UNFINISHED_HOLD_MS,
  type TurnModels,
} from './turn-taking';

/** Audio kept before the VAD's decision, so the turn heard by STT includes its onset. */
const PREROLL_MS = 500;
/** How often the caller's words so far are transcribed while they speak (partials). */
const PARTIAL_EVERY_MS = 900;
/** A turn shorter than this is not sent for a partial. */
const PARTIAL_MIN_MS = 600;
/**
 * A stretch of a turn at least this long before a pause the caller spoke on after is kept as a phrase: its
 * speculative transcript stands, and the turn's final transcribes only what follows (a 7 s turn's final took
 * 0.5-0.6 s after the turn end; its last phrase, a fraction). Shorter ones are transcribed again with what follows.
 */
const PHRASE_MIN_MS = 1000;
/** No audio from the caller for this long (a browser or phone that went away without a word): the session ends. */
const MEDIA_SILENCE_TIMEOUT_MS = 20_000;
/** Longest a goodbye may play before the leg closes anyway. */
const GOODBYE_MAX_MS = 15_000;

/** The caller's turn, ended and transcribed. */
interface SpokenTurn {
  text: string;
}

/** A spoken turn's timing so far (see TurnStats). */
interface Timing {
  speechEndedAt: number;
  lastVoiceAt: number;
  sttMs: number;
}

/** What one turn cost (the latency benchmark reads these). */
export interface TurnStats {
  /**
   * When the turn was taken as ended by silence, ms epoch: CONFIRM_AFTER_MS (VOICE_SILENCE_MS) after the last voiced
   * audio, or UNFINISHED_HOLD_MS when it sounded unfinished.
   */
  speechEndedAt: number;
  /** The last voiced frame, ms epoch (the VAD's share is speechEndedAt - this). */
  lastVoiceAt: number;
  /** From speechEndedAt to the final transcript in hand and the end of turn confirmed (0 when the speculative one was ready). */
  sttMs: number;
  /** From the transcript to the reply's first clause (streamed: its first clause complete in the deltas; else the whole reply). */
  modelMs: number;
  /** Synthesis of the first clause. */
  ttsMs: number;
  /** The first agent frame handed to the leg, ms epoch. */
  firstAudioAt: number;
  text: string;
  reply: string;
}

export interface VoiceAgentOptions {
  leg: MediaLeg;
  stt: SpeechRecognizer;
  tts: SpeechSynthesizer;
  /**
   * The conversation actor's turn for what the caller said (or an injected text); resolves
   * with the agent's whole reply ('' = nothing to say). `onDelta`, when the producer
   * streams, gets successive chunks of the reply as the model writes them (they
   * concatenate to the reply): the agent speaks each clause as soon as it is complete.
   */
  turn: (text: string, source: 'speech' | 'text', onDelta?: (chunk: string) => void) => Promise<string>;
  recorder?: CallRecorder | null;
  /** The energy VAD's options (used without Silero); `silenceMs` is also Silero's hang-over (VOICE_SILENCE_MS). */
  vad?: VadOptions;
  /** Silero VAD and Smart Turn (domain/voice/turn-taking.ts turnModels); without Silero the energy VAD decides, without Smart Turn the text alone. */
  models?: TurnModels | null;
  log?: Logger;
  onTurn?: (stats: TurnStats) => void;
  now?: () => number;
  /** No audio from the caller for this long ends the session (media_timeout); VOICE_MEDIA_TIMEOUT_SECONDS, default 20 s. */
  mediaTimeoutMs?: number;
}

/** What the agent needs of a VAD: the energy one (sync) or Silero (async). */
interface FrameVad {
  push(samples: Int16Array): VadEvent[] | Promise<VadEvent[]>;
  finish(): VadEvent[];
  readonly inSpeech: boolean;
  readonly trailingSilenceMs: number;
  readonly lastVoicedSample: number;
  readonly samplesSeen: number;
  readonly voicedMs: number;
  readonly sampleRate: number;
}

/** The speculative end of a turn: its transcript and Smart Turn's verdict, of the audio up to the voiced sample `voicedEnd`. */
interface Speculation {
  voicedEnd: number;
  /** The whole turn's transcript: its kept phrases' and the tail's. */
  text: Promise<string>;
  /** The transcript of the audio after the last kept phrase, up to `frames`. */
  tail: Promise<string>;
  /** The utterance's frames it heard. */
  frames: number;
  /** Smart Turn's probability that the turn is complete (null without the model or when it failed). */
  complete: Promise<number | null>;
  queued: AbortController;
}

/** The caller speaking while the agent talks (or is about to): a backchannel or an interruption. */
interface Overlap {
  /** The agent's speech was stopped for it. */
  interrupted: boolean;
  /** The agent's audio was paused for it (INTERRUPT_AFTER_MS of speech not yet known to be a backchannel). */
  paused: boolean;
  /** What was heard so far (transcribed at OVERLAP_CHECK_MS of voiced audio, then again); null while none came back. */
  heard: string | null;
  checking: boolean;
  checkedAtMs: number;
}

/**
 * One live voice conversation: the caller's audio through voice-activity detection
 * (Silero VAD, else the energy VAD), speech-to-text (partials while they speak, the final
 * one started speculatively at SPECULATE_AFTER_MS of quiet and dropped if they speak
 * again), the end of the turn (CONFIRM_AFTER_MS of quiet when it sounds finished, up to
 * UNFINISHED_HOLD_MS when Smart Turn or the transcript says it is not), the conversation
 * actor's turn, speech synthesis clause by clause as the reply streams in, and the audio
 * back. The caller speaking over the agent stops it (barge-in) once it is not a
 * backchannel ("yeah", "mhm"): see turn-taking.ts. Transcript frames go on the leg's
 * `transcript` channel: `partial: true` deltas, then one `partial: false` per turn and speaker.
 */
export class VoiceAgent {
  private readonly vad: FrameVad;
  private readonly preroll: Int16Array[] = [];
  private readonly prerollFrames = Math.ceil(PREROLL_MS / FRAME_MS);
  /** The caller's turn under way: its audio from the onset (through pauses), until the turn ends. */
  private utterance: Int16Array[] | null = null;
  /** The VAD heard the end of speech; the turn is being judged (or held through a pause). */
  private holding: { voicedEnd: number; lastVoiceAt: number; silenceEndedAt: number; timer: NodeJS.Timeout | null } | null = null;
  private partialTimer: NodeJS.Timeout | null = null;
  private partialRunning: { done: Promise<void>; queued: AbortController; running: AbortController } | null = null;
  private early: Speculation | null = null;
  /** The turn's phrases so far (PHRASE_MIN_MS): the utterance's frames up to each one's end, and its transcript. */
  private phrases: Array<{ frames: number; text: Promise<string> }> = [];
  private overlap: Overlap | null = null;
  private frames: Promise<void> = Promise.resolve();
  /** Agent audio handed to the leg and not yet played (frames of each piece played so far), so a pause can resume it. */
  private outQueue: Array<{ pcm: Int16Array; frames: number; played: number }> = [];
  /** Agent audio held while paused (the caller speaking over it, not known yet to be a backchannel). */
  private paused: Int16Array[] | null = null;
  private turns: Promise<void> = Promise.resolve();
  /** Aborts the agent's speech in progress (barge-in, end). */
  private speaking: AbortController | null = null;
  private lastFrameAt = 0;
  private stopped = false;
  private finish!: (reason: string) => void;
  private readonly finished: Promise<string>;
  private readonly now: () => number;

  constructor(private readonly o: VoiceAgentOptions) {
    const silenceMs = o.vad?.silenceMs ?? CONFIRM_AFTER_MS;
    this.vad = o.models?.silero ? new SileroVad(o.models.silero, { silenceMs }) : new Vad({ sampleRate: MEDIA_RATE, ...o.vad, silenceMs });
    this.now = o.now ?? Date.now;
    this.finished = new Promise((resolve) => (this.finish = resolve));
    o.leg.onAudio((frame) => this.onFrame(frame));
    // Placed when the caller hears it: a frame sent ahead goes where its play time falls on the call's clock.
    if (o.recorder) o.leg.onPlayed((frame, aheadMs) => o.recorder!.agent(frame, o.recorder!.clockSample + Math.round((aheadMs * o.recorder!.sampleRate) / 1000)));
    o.leg.onPlayed(() => {
      const head = this.outQueue[0];
      if (head && ++head.played >= head.frames) this.outQueue.shift();
    });
  }

  /** Agent audio out (held instead while paused). */
  private play(pcm: Int16Array): void {
    if (this.paused) {
      this.paused.push(pcm);
      return;
    }
    this.outQueue.push({ pcm, frames: Math.ceil(pcm.length / FRAME_SAMPLES), played: 0 });
    // Sent ahead of its play time (the far end's jitter buffer rides out a stall of this loop), except while the caller talks over it.
    this.o.leg.setSendAhead?.(this.overlap ? 0 : null);
    this.o.leg.play(pcm);
  }

  /** Stops the agent's audio where it is, keeping the rest to resume. */
  private pausePlayback(): void {
    if (this.paused) return;
    this.paused = this.outQueue.map((c) => c.pcm.subarray(c.played * FRAME_SAMPLES)).filter((p) => p.length > 0);
    this.outQueue = [];
    this.o.leg.clearPlayback();
  }

  private resumePlayback(): void {
    const held = this.paused;
    this.paused = null;
    for (const pcm of held ?? []) this.play(pcm);
  }

  /** Which VAD hears the caller: 'silero' or 'energy'. */
  get vadKind(): 'silero' | 'energy' {
    return this.vad instanceof SileroVad ? 'silero' : 'energy';
  }

  /** Runs until the caller leaves, `end()` is called or `signal` aborts; the reason it ended. */
  async run(signal?: AbortSignal): Promise<string> {
    const aborted = new Promise<string>((resolve) => signal?.addEventListener('abort', () => resolve('cancelled'), { once: true }));
    this.lastFrameAt = this.now();
    const watchdog = setInterval(() => {
      if (this.now() - this.lastFrameAt > (this.o.mediaTimeoutMs ?? MEDIA_SILENCE_TIMEOUT_MS)) this.finish('media_timeout');
    }, 1000);
    const reason = await Promise.race([this.o.leg.ended, this.finished, aborted]);
    clearInterval(watchdog);
    this.stopped = true;
    if (this.partialTimer) clearInterval(this.partialTimer);
    if (this.holding?.timer) clearTimeout(this.holding.timer);
    this.dropEarly();
    this.partialRunning?.queued.abort();
    this.speaking?.abort(new Error('ended'));
    await this.o.leg.close();
    return reason;
  }

  /** A text turn (POST /voice/inject_text): as if the caller had said it. */
  inject(text: string): void {
    if (this.stopped) return;
    this.frame('user', text, false);
    this.enqueue(text, 'text', null);
  }

  /** Resolves once the turns so far have been answered and their audio has played (a transfer waits for its announcement). */
  async spoken(): Promise<void> {
    await this.turns.catch(() => undefined);
    while (this.o.leg.playing && !this.stopped) await new Promise((r) => setTimeout(r, 50));
  }

  /** Ends the session, saying `goodbye` first when given (out of credits, time limit). */
  async end(reason: string, goodbye?: string): Promise<void> {
    if (this.stopped) return;
    if (goodbye) {
      await this.turns.catch(() => undefined);
      const said = await this.say(goodbye, new AbortController()).catch(() => '');
      if (said) this.frame('assistant', goodbye, false);
      const until = this.now() + GOODBYE_MAX_MS;
      while (this.o.leg.playing && this.now() < until && !this.stopped) await new Promise((r) => setTimeout(r, 50));
    }
    this.finish(reason);
  }

  private onFrame(frame: Int16Array): void {
    if (this.stopped) return;
    this.lastFrameAt = this.now();
    this.o.recorder?.caller(frame);
    // Silero answers asynchronously: frames are analysed one after the other, in order.
    this.frames = this.frames.then(() => this.analyse(frame)).catch((err) => this.o.log?.warn({ err }, 'voice activity detection failed'));
  }

  private async analyse(frame: Int16Array): Promise<void> {
    const events = await this.vad.push(frame);
    if (this.stopped) return;
    if (this.utterance) this.utterance.push(frame);
    else {
      this.preroll.push(frame);
      if (this.preroll.length > this.prerollFrames) this.preroll.shift();
    }
    for (const e of events) {
      if (e.type === 'speech_start') this.speechStarted();
      else {
        // The VAD's hang-over ran out: the last voiced audio ended then, on this clock.
        const lastVoiceAt = this.now() - ((this.vad.samplesSeen - e.sample) * 1000) / this.vad.sampleRate;
        this.speechEnded(e.sample, lastVoiceAt);
      }
    }
    if (this.utterance && this.vad.inSpeech) {
      this.speculate();
      if (this.overlap) this.overlapping();
    }
  }

  /** Whether the agent is talking, or about to (its reply under way). */
  private get agentBusy(): boolean {
    return this.o.leg.playing || this.speaking !== null || (this.paused?.length ?? 0) > 0;
  }

  /** Starts the turn's final transcription and end-of-turn check once the caller has been quiet SPECULATE_AFTER_MS; drops them when they speak again. */
  private speculate(force = false): void {
    // They spoke again after the pause: what came before it is a phrase (its transcript kept), if long enough.
    if (this.early && this.early.voicedEnd !== this.vad.lastVoicedSample) this.keepPhrase();
    if (this.early || (!force && this.vad.trailingSilenceMs < SPECULATE_AFTER_MS)) return;
    // A partial under way would hold the final up (one transcription at a time): its words are stale now.
    this.partialRunning?.queued.abort();
    this.partialRunning?.running.abort();
    const queued = new AbortController();
    const utterance = this.utterance!;
    const samples = concatFrames(utterance);
    const tail = this.o.stt.transcribe(concatFrames(utterance.slice(this.phraseEnd)), undefined, { whileQueued: queued.signal });
    tail.catch(() => undefined);
    const text = this.withPhrases(tail);
    text.catch(() => undefined);
    const smart = this.o.models?.smartTurn;
    const complete = smart
      ? smart.predict8k(samples).then(
          (p) => p.probability,
          (err) => (this.o.log?.warn({ err }, 'Smart Turn failed'), null),
        )
      : Promise.resolve(null);
    this.early = { voicedEnd: this.vad.lastVoicedSample, text, tail, frames: utterance.length, complete, queued };
  }

  private dropEarly(): void {
    this.early?.queued.abort();
    this.early = null;
  }

  /** Where the audio not yet in a phrase starts, in the utterance's frames. */
  private get phraseEnd(): number {
    return this.phrases.at(-1)?.frames ?? 0;
  }

  /** The speculation of a pause the caller spoke on after: its tail becomes a phrase when long enough, else it is dropped. */
  private keepPhrase(): void {
    const early = this.early!;
    if ((early.frames - this.phraseEnd) * FRAME_MS < PHRASE_MIN_MS) return this.dropEarly();
    this.phrases.push({ frames: early.frames, text: early.tail.catch(() => '') });
    this.early = null;
  }

  /** The turn's transcript: its phrases' and then `tail`'s, with one space between. */
  private async withPhrases(tail: Promise<string>): Promise<string> {
    const parts = await Promise.all([...this.phrases.map((p) => p.text), tail]);
    return parts
      .map((t) => t.trim())
      .filter(Boolean)
      .join(' ');
  }

  private speechStarted(): void {
    if (this.holding) {
      // A pause, not the end: the same turn goes on (its audio through the pause is kept).
      if (this.holding.timer) clearTimeout(this.holding.timer);
      this.holding = null;
      if (this.early) this.keepPhrase();
    } else {
      this.utterance = this.preroll.splice(0);
      this.phrases = [];
      // Over the agent's voice: not an interruption yet (a backchannel keeps the agent talking).
      this.overlap = this.agentBusy ? { interrupted: false, paused: false, heard: null, checking: false, checkedAtMs: 0 } : null;
      // From now on each frame goes when due: a barge-in then cuts the agent off where it is, with nothing more on its way.
      if (this.overlap) this.o.leg.setSendAhead?.(0);
    }
    if (!this.partialTimer) this.partialTimer = setInterval(() => this.partial(), PARTIAL_EVERY_MS);
  }

  /**
   * The caller speaks over the agent. At INTERRUPT_AFTER_MS of voiced audio the agent's
   * audio pauses, unless what was heard so far is already known to be a backchannel; it
   * stops for good (barge-in) as soon as the words heard are not a backchannel, or at
   * BACKCHANNEL_MAX_MS; a backchannel that ends resumes it where it paused (endTurn).
   */
  private overlapping(): void {
    const o = this.overlap!;
    if (o.interrupted) return;
    if (!this.agentBusy) {
      // The agent finished on its own: nothing to interrupt; the turn is an ordinary one.
      this.overlap = null;
      return;
    }
    const voiced = this.vad.voicedMs;
    if (!o.checking && voiced >= OVERLAP_CHECK_MS && voiced - o.checkedAtMs >= OVERLAP_CHECK_MS) {
      o.checking = true;
      o.checkedAtMs = voiced;
      void this.o.stt
        .transcribe(concatFrames(this.utterance!), undefined, { partial: true })
        .then((t) => {
          o.heard = t.trim();
          if (o.paused && !o.interrupted && this.overlap === o && !isBackchannel(o.heard)) this.interrupt(o);
        })
        .catch(() => undefined)
        .finally(() => (o.checking = false));
    }
    if (voiced < INTERRUPT_AFTER_MS) return;
    if (voiced >= BACKCHANNEL_MAX_MS) return this.interrupt(o);
    if (o.heard !== null && !isBackchannel(o.heard)) return this.interrupt(o);
    if (!o.paused && !(o.heard !== null && isBackchannel(o.heard))) {
      o.paused = true;
      this.pausePlayback();
    }
  }

  private interrupt(o: Overlap): void {
    o.interrupted = true;
    this.paused = null;
    this.outQueue = [];
    this.o.leg.clearPlayback();
    this.speaking?.abort(new Error('barge-in'));
  }

  private partial(): void {
    const turn = this.utterance;
    if (!turn || this.partialRunning || this.early || this.holding || turn.length * FRAME_MS < PARTIAL_MIN_MS) return;
    // The turn is probably ending: its final is about to start, which a partial would only delay.
    if (this.vad.trailingSilenceMs >= SPECULATE_AFTER_MS) return;
    const samples = concatFrames(turn.slice(this.phraseEnd));
    const queued = new AbortController();
    const stop = new AbortController();
    const running = {
      queued,
      running: stop,
      done: this.withPhrases(this.o.stt.transcribe(samples, stop.signal, { partial: true, whileQueued: queued.signal }))
        .then((text) => {
          if (text && this.utterance === turn) this.frame('user', text, true);
        })
        .catch((err) => {
          if (!queued.signal.aborted && !stop.signal.aborted) this.o.log?.warn({ err }, 'voice partial transcription failed');
        })
        .finally(() => {
          if (this.partialRunning === running) this.partialRunning = null;
        }),
    };
    this.partialRunning = running;
  }

  /**
   * The VAD's hang-over ran out (`voicedEnd`: where the last voiced audio ended). The turn
   * ends now if it sounds finished (its transcript and Smart Turn's verdict, started
   * speculatively), else it is held: speech within UNFINISHED_HOLD_MS of the last voice
   * continues it.
   */
  private speechEnded(voicedEnd: number, lastVoiceAt: number): void {
    if (!this.utterance) return;
    // A partial still waiting for the model is stale now: dropped, so the final does not queue behind it.
    this.partialRunning?.queued.abort();
    if (this.early?.voicedEnd !== voicedEnd) {
      this.dropEarly();
      this.speculate(true);
      this.early!.voicedEnd = voicedEnd;
    }
    const hold = { voicedEnd, lastVoiceAt, silenceEndedAt: this.now(), timer: null as NodeJS.Timeout | null };
    this.holding = hold;
    void this.judge(hold);
  }

  private async judge(hold: NonNullable<VoiceAgent['holding']>): Promise<void> {
    const early = this.early!;
    const text = (await early.text.catch(() => '')).trim();
    if (this.holding !== hold) return;
    const waitUntil = this.now() + SMART_TURN_WAIT_MS;
    const probability = await Promise.race([early.complete, new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, waitUntil - this.now())))]);
    if (this.holding !== hold) return;
    const unfinished = soundsUnfinished(text) || (probability !== null && probability < SMART_TURN_THRESHOLD);
    // Over the agent: a backchannel is no turn, whatever its length of quiet.
    if (!unfinished || (this.overlap && !this.overlap.interrupted)) return this.endTurn(hold, text, hold.silenceEndedAt);
    const due = hold.lastVoiceAt + UNFINISHED_HOLD_MS;
    hold.timer = setTimeout(() => {
      if (this.holding === hold) this.endTurn(hold, text, due);
    }, Math.max(0, due - this.now()));
  }

  /** The turn is over: its transcript goes to the conversation (or, a backchannel over the agent, only to the transcript). */
  private endTurn(hold: NonNullable<VoiceAgent['holding']>, text: string, speechEndedAt: number): void {
    if (this.partialTimer) clearInterval(this.partialTimer);
    this.partialTimer = null;
    this.holding = null;
    this.early = null;
    this.utterance = null;
    this.phrases = [];
    const overlap = this.overlap;
    this.overlap = null;
    if (!text) {
      if (overlap?.paused && !overlap.interrupted) this.resumePlayback();
      return;
    }
    if (overlap && !overlap.interrupted) {
      if (isBackchannel(text)) {
        // "mhm" while the agent talks: heard and kept in the transcript; the agent goes on (from where it paused), no new model turn.
        this.frame('user', text, false);
        if (overlap.paused) this.resumePlayback();
        return;
      }
      // Short, but words ("stop", "wait"): an interruption after all.
      this.interrupt(overlap);
    }
    this.frame('user', text, false);
    this.enqueue({ text }, 'speech', { speechEndedAt, lastVoiceAt: hold.lastVoiceAt, sttMs: Math.max(0, this.now() - speechEndedAt) });
  }

  /** Turns run one at a time, in the order the caller spoke. */
  private enqueue(input: SpokenTurn | string, source: 'speech' | 'text', timing: Timing | null): void {
    this.turns = this.turns
      .then(() => this.runTurn(input, source, timing))
      .catch((err) => this.o.log?.warn({ err }, 'voice turn failed'));
  }

  private async runTurn(input: SpokenTurn | string, source: 'speech' | 'text', timing: Timing | null): Promise<void> {
    if (this.stopped) return;
    const text = typeof input === 'string' ? input : input.text;
    const t1 = this.now();
    // The reply is spoken clause by clause as the model writes it (see ClauseStream).
    const control = new AbortController();
    const clauses = new ClauseStream();
    let modelMs: number | null = null;
    // The stats go out once the first audio left and the whole reply is known (it may be heard before the model is done).
    let heard: { ttsMs: number; firstAudioAt: number } | null = null;
    let reply: string | null = null;
    const report = () => {
      if (timing && heard && reply !== null) this.o.onTurn?.({ ...timing, modelMs: modelMs ?? 0, ...heard, text, reply });
    };
    const speech = this.speak(clauses, control, (ttsMs, firstAudioAt) => {
      heard = { ttsMs, firstAudioAt };
      report();
    });
    clauses.onFirst = () => (modelMs ??= this.now() - t1);
    let streamed = false;
    try {
      reply = (
        await this.o.turn(text, source, (chunk) => {
          if (!chunk || control.signal.aborted) return;
          streamed = true;
          clauses.write(chunk);
        })
      ).trim();
    } catch (err) {
      clauses.end();
      control.abort(err);
      await speech.catch(() => undefined);
      throw err;
    }
    // Without deltas the whole reply is cut into clauses now; with them, what is left is the last clause.
    if (!streamed && !this.stopped) clauses.write(reply);
    clauses.end();
    report();
    if (this.stopped || !reply) {
      control.abort(new Error('nothing to say'));
      await speech.catch(() => undefined);
      return;
    }
    const spoken = await speech;
    if (spoken || !this.stopped) this.frame('assistant', reply, false);
  }

  /** Speaks `text` clause by clause (the first one is heard while the rest is synthesized); the text said. */
  private async say(text: string, control: AbortController, first?: (ttsMs: number, firstAudioAt: number) => void): Promise<string> {
    const clauses = new ClauseStream();
    clauses.write(text);
    clauses.end();
    return this.speak(clauses, control, first);
  }

  /** Synthesizes and plays each clause as it arrives, one after the other, until the stream ends or `control` aborts; the text said. */
  private async speak(clauses: ClauseStream, control: AbortController, first?: (ttsMs: number, firstAudioAt: number) => void): Promise<string> {
    this.speaking = control;
    let said = '';
    try {
      for (;;) {
        const clause = await clauses.next(control.signal);
        if (clause === null || control.signal.aborted || this.stopped) break;
        const t = this.now();
        const pcm = await this.o.tts.synthesize(clause, control.signal);
        if (control.signal.aborted || this.stopped) break;
        said = said ? `${said} ${clause}` : clause;
        this.frame('assistant', said, true);
        this.play(pcm);
        if (first) {
          first(this.now() - t, this.now());
          first = undefined;
        }
      }
    } catch (err) {
      if (!control.signal.aborted) throw err;
    } finally {
      if (this.speaking === control) this.speaking = null;
    }
    return said;
  }

  private frame(speaker: TranscriptFrame['speaker'], text: string, partial: boolean): void {
    this.o.leg.sendTranscript({ type: 'transcript', speaker, text, timestamp: this.now(), partial });
  }
}

/** Markdown and links read aloud badly: what a voice says of a chat reply. */
export function spokenText(text: string): string {
  return text
    .replace(/```[\s\S]*?```/g, ' ')
    .replace(/!\[[^\]]*\]\([^)]*\)/g, ' ')
    .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1')
    .replace(/https?:\/\/\S+/g, 'the link in the chat')
    .replace(/[*_`#>|]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** A clause ending at a comma, semicolon or colon is spoken on its own once it is this long (shorter ones wait for more). */
export const MIN_CLAUSE_CHARS = 25;
/** Past this, a clause is cut at its last space even without punctuation (synthesis of a long run-on would delay its audio). */
const MAX_CLAUSE_CHARS = 200;

/**
 * The reply's text as it streams in, cut into clauses to synthesize: at sentence ends
 * (`.`, `!`, `?` or a line break, followed by a space or the end), and at `,` `;` `:`
 * once the clause is MIN_CLAUSE_CHARS long. Markdown is cleaned per clause
 * (spokenText); a clause never ends inside a code block or a link (they wait until
 * closed). Clauses that clean to nothing (a code block) are skipped.
 */
export class ClauseStream {
  private buffer = '';
  private ended = false;
  private readonly ready: string[] = [];
  private wake: (() => void) | null = null;
  /** Called when the first clause is complete. */
  onFirst: (() => void) | null = null;

  write(chunk: string): void {
    if (this.ended) return;
    this.buffer += chunk;
    this.cut(false);
  }

  /** The next complete clause if there is one, without waiting. */
  take(): string | null {
    return this.ready.shift() ?? null;
  }

  /** No more text: what is left is the last clause. */
  end(): void {
    if (this.ended) return;
    this.cut(true);
    this.ended = true;
    this.notify();
  }

  /** The next clause; null once the stream ended and every clause was taken, or when `signal` aborts. */
  async next(signal?: AbortSignal): Promise<string | null> {
    for (;;) {
      if (signal?.aborted) return null;
      if (this.ready.length) return this.ready.shift()!;
      if (this.ended) return null;
      await new Promise<void>((resolve) => {
        // The abort listener goes when the wait ends, so a long reply leaves none behind (MaxListenersExceeded).
        const onAbort = () => resolve();
        this.wake = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  private cut(final: boolean): void {
    for (;;) {
      const at = clauseEnd(this.buffer, final);
      if (at <= 0) break;
      this.push(this.buffer.slice(0, at));
      this.buffer = this.buffer.slice(at);
    }
    if (final && this.buffer.trim()) {
      this.push(this.buffer);
      this.buffer = '';
    }
  }

  private push(raw: string): void {
    const clause = spokenText(raw);
    if (!clause || !/[\p{L}\p{N}]/u.test(clause)) return;
    this.ready.push(clause);
    if (this.onFirst) {
      this.onFirst();
      this.onFirst = null;
    }
    this.notify();
  }
}

/** Where the first complete clause of `text` ends (0: none yet). `final`: no more text follows, so a mark at the very end counts. */
export function clauseEnd(text: string, final = false): number {
  let lastSpace = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const next = text[i + 1];
    const atBoundary = next === undefined ? final : /\s/.test(next);
    if (c === '\n' && text.slice(0, i).trim() && open(text.slice(0, i)) === false) return i + 1;
    if (/\s/.test(c)) lastSpace = i;
    if (!atBoundary || open(text.slice(0, i + 1))) continue;
    if (/[.!?]/.test(c) && !/^\s*$/.test(text.slice(0, i)) && !abbreviation(text.slice(0, i + 1))) return i + 1;
    if (/[,;:]/.test(c) && text.slice(0, i).trim().length >= MIN_CLAUSE_CHARS) return i + 1;
    if (i >= MAX_CLAUSE_CHARS && lastSpace > 0 && !open(text.slice(0, lastSpace))) return lastSpace + 1;
  }
  return 0;
}

/** Whether `text` ends inside a code block or a markdown link/image (a clause may not end there). */
function open(text: string): boolean {
  if ((text.match(/```/g)?.length ?? 0) % 2 === 1) return true;
  const lastOpen = text.lastIndexOf('[');
  if (lastOpen > text.lastIndexOf(']')) return true;
  const paren = text.lastIndexOf('](');
  return paren >= 0 && text.indexOf(')', paren) < 0;
}

/** Common abbreviations and initials whose dot ends no sentence ("e.g.", "Dr.", "U.S."). */
function abbreviation(text: string): boolean {
  return /(?:^|\s)(?:e\.g|i\.e|etc|vs|Mr|Mrs|Ms|Dr|St|No|approx|[A-Z](?:\.[A-Z])*)\.$/.test(text);
}

/** Sentences and clauses of a whole text, as the agent speaks them (see ClauseStream). */
export function sentences(text: string): string[] {
  const stream = new ClauseStream();
  stream.write(text);
  stream.end();
  const out: string[] = [];
  for (let c = stream.take(); c !== null; c = stream.take()) out.push(c);
  return out;
}
