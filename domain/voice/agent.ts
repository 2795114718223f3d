import type { Logger } from 'pino';
import { concatFrames } from '../../lib/audio/audio';
import type { CallRecorder } from './recorder';
import type { SpeechRecognizer } from '../ports/speech';
import type { SpeechSynthesizer } from '../ports/speech';
import { FRAME_MS, MEDIA_RATE, type MediaLeg, type TranscriptFrame } from '../ports/voice';
import { Vad, type VadOptions } from '../../lib/audio/vad';

/** Audio kept before the VAD's decision, so the turn heard by STT includes its onset. */
const PREROLL_MS = 500;
/** How often the caller's words so far are transcribed while they speak (partials). */
const PARTIAL_EVERY_MS = 900;
/** A turn shorter than this is not sent for a partial. */
const PARTIAL_MIN_MS = 600;
/**
 * Quiet after the caller's last voiced frame from which the turn is probably ending: its
 * final transcription starts then (early), before the VAD's silence window has run out,
 * and no partial starts. Speech resuming drops the early one (its result, and its work
 * when it still waits in the model's queue).
 */
const EARLY_FINAL_AFTER_MS = 200;
/** No audio from the caller for this long (a browser or phone that went away without a word): the session ends. */
const MEDIA_SILENCE_TIMEOUT_MS = 20_000;
/** Longest a goodbye may play before the leg closes anyway. */
const GOODBYE_MAX_MS = 15_000;

/** The caller's audio of one turn; `early`: its final transcription, started before the turn ended (the same audio up to its last voiced frame). */
interface SpokenTurn {
  samples: Int16Array;
  early: Promise<string> | null;
}

/** What one turn cost (the latency benchmark reads these). */
export interface TurnStats {
  /** When the VAD ended the turn (silenceMs after the last voiced frame), ms epoch. */
  speechEndedAt: number;
  /** The last voiced frame, ms epoch (the VAD's share is speechEndedAt - this). */
  lastVoiceAt: number;
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
  vad?: VadOptions;
  log?: Logger;
  onTurn?: (stats: TurnStats) => void;
  now?: () => number;
  /** No audio from the caller for this long ends the session (media_timeout); VOICE_MEDIA_TIMEOUT_SECONDS, default 20 s. */
  mediaTimeoutMs?: number;
}

/**
 * One live voice conversation: the caller's audio through voice-activity detection,
 * speech-to-text (partials while they speak), the conversation actor's turn, speech
 * synthesis sentence by sentence, and the audio back. The caller speaking over the agent
 * stops the agent's audio (barge-in). Transcript frames go on the leg's `transcript`
 * channel: `partial: true` deltas, then one `partial: false` per turn and speaker.
 */
export class VoiceAgent {
  private readonly vad: Vad;
  private readonly preroll: Int16Array[] = [];
  private readonly prerollFrames = Math.ceil(PREROLL_MS / FRAME_MS);
  private utterance: Int16Array[] | null = null;
  private partialTimer: NodeJS.Timeout | null = null;
  private partialRunning: { done: Promise<void>; queued: AbortController } | null = null;
  /** The final transcription started early (see EARLY_FINAL_AFTER_MS): of the turn up to the voiced frame ending at `voicedEnd`. */
  private early: { voicedEnd: number; text: Promise<string>; queued: AbortController } | null = null;
  private turns: Promise<void> = Promise.resolve();
  /** Aborts the agent's speech in progress (barge-in, end). */
  private speaking: AbortController | null = null;
  private lastVoiceAt = 0;
  private lastFrameAt = 0;
  private stopped = false;
  private finish!: (reason: string) => void;
  private readonly finished: Promise<string>;
  private readonly now: () => number;

  constructor(private readonly o: VoiceAgentOptions) {
    this.vad = new Vad({ sampleRate: MEDIA_RATE, ...o.vad });
    this.now = o.now ?? Date.now;
    this.finished = new Promise((resolve) => (this.finish = resolve));
    o.leg.onAudio((frame) => this.onFrame(frame));
    if (o.recorder) o.leg.onPlayed((frame) => o.recorder!.agent(frame));
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
    const events = this.vad.push(frame);
    if (this.utterance) this.utterance.push(frame);
    else {
      this.preroll.push(frame);
      if (this.preroll.length > this.prerollFrames) this.preroll.shift();
    }
    for (const e of events) {
      if (e.type === 'speech_start') this.speechStarted();
      else {
        // The turn ended silenceMs after its last voiced frame: when that frame ended, on this clock.
        this.lastVoiceAt = this.now() - ((this.vad.samplesSeen - e.sample) * 1000) / MEDIA_RATE;
        this.speechEnded(e.sample);
      }
    }
    if (this.utterance && this.vad.inSpeech) this.earlyFinal();
  }

  /** Starts the turn's final transcription once the caller has been quiet EARLY_FINAL_AFTER_MS; drops it when they speak again. */
  private earlyFinal(): void {
    if (this.early && this.early.voicedEnd !== this.vad.lastVoicedSample) this.dropEarly();
    if (this.early || this.vad.trailingSilenceMs < EARLY_FINAL_AFTER_MS) return;
    const queued = new AbortController();
    const text = this.o.stt.transcribe(concatFrames(this.utterance!), undefined, { whileQueued: queued.signal });
    text.catch(() => undefined);
    this.early = { voicedEnd: this.vad.lastVoicedSample, text, queued };
  }

  private dropEarly(): void {
    this.early?.queued.abort();
    this.early = null;
  }

  private speechStarted(): void {
    // Barge-in: the caller talks over the agent, whose audio stops at once.
    if (this.o.leg.playing || this.speaking) {
      this.o.leg.clearPlayback();
      this.speaking?.abort(new Error('barge-in'));
    }
    this.utterance = this.preroll.splice(0);
    this.partialTimer = setInterval(() => this.partial(), PARTIAL_EVERY_MS);
  }

  private partial(): void {
    const turn = this.utterance;
    if (!turn || this.partialRunning || this.early || turn.length * FRAME_MS < PARTIAL_MIN_MS) return;
    // The turn is probably ending: its final is about to start, which a partial would only delay.
    if (this.vad.trailingSilenceMs >= EARLY_FINAL_AFTER_MS) return;
    const samples = concatFrames(turn);
    const queued = new AbortController();
    const running = {
      queued,
      done: this.o.stt
        .transcribe(samples, undefined, { partial: true, whileQueued: queued.signal })
        .then((text) => {
          if (text && this.utterance === turn) this.frame('user', text, true);
        })
        .catch((err) => {
          if (!queued.signal.aborted) this.o.log?.warn({ err }, 'voice partial transcription failed');
        })
        .finally(() => {
          if (this.partialRunning === running) this.partialRunning = null;
        }),
    };
    this.partialRunning = running;
  }

  /** `voicedEnd`: where the turn's last voiced frame ended (the VAD's clock). */
  private speechEnded(voicedEnd: number): void {
    if (this.partialTimer) clearInterval(this.partialTimer);
    this.partialTimer = null;
    const turn = this.utterance;
    this.utterance = null;
    // A partial still waiting for the model is stale now: dropped, so the final does not queue behind it.
    this.partialRunning?.queued.abort();
    const early = this.early?.voicedEnd === voicedEnd ? this.early.text : null;
    if (!early) this.dropEarly();
    this.early = null;
    if (!turn?.length) return;
    const speechEndedAt = this.now();
    this.enqueue({ samples: concatFrames(turn), early }, 'speech', { speechEndedAt, lastVoiceAt: this.lastVoiceAt });
  }

  /** Turns run one at a time, in the order the caller spoke. */
  private enqueue(input: SpokenTurn | string, source: 'speech' | 'text', timing: { speechEndedAt: number; lastVoiceAt: number } | null): void {
    this.turns = this.turns
      .then(() => this.runTurn(input, source, timing))
      .catch((err) => this.o.log?.warn({ err }, 'voice turn failed'));
  }

  private async runTurn(input: SpokenTurn | string, source: 'speech' | 'text', timing: { speechEndedAt: number; lastVoiceAt: number } | null): Promise<void> {
    if (this.stopped) return;
    let text: string;
    const t0 = this.now();
    if (typeof input === 'string') text = input;
    else {
      // A running partial is not waited for (its words are stale); the final may still queue behind it in the model.
      const final = input.early ? input.early.catch(() => this.o.stt.transcribe(input.samples)) : this.o.stt.transcribe(input.samples);
      text = (await final).trim();
      if (!text) return;
      this.frame('user', text, false);
    }
    const t1 = this.now();
    // The reply is spoken clause by clause as the model writes it (see ClauseStream).
    const control = new AbortController();
    const clauses = new ClauseStream();
    let modelMs: number | null = null;
    // The stats go out once the first audio left and the whole reply is known (it may be heard before the model is done).
    let heard: { ttsMs: number; firstAudioAt: number } | null = null;
    let reply: string | null = null;
    const report = () => {
      if (timing && heard && reply !== null) this.o.onTurn?.({ ...timing, sttMs: t1 - t0, modelMs: modelMs ?? 0, ...heard, text, reply });
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
        this.o.leg.play(pcm);
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
        this.wake = resolve;
        signal?.addEventListener('abort', () => resolve(), { once: true });
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
