import fs from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { PgNotifications, Subscription } from '../../db/notifications';
import type { BlobStore } from '../ports/blob-store';
import { VoiceAgent, type TurnStats } from './agent';
import { defaultModelsDir, turnModels } from './turn-taking';
import { CallRecorder, finalizeRecordings } from './recorder';
import { recordingView, VOICE_CONTROL, type RecordingView, type VoiceSessionService } from './sessions';
import { PgRecordingSpool } from './spool';
import { carryOutPhoneControl, keypadTurns } from './phone-call';
import type { SpeechRecognizer } from '../ports/speech';
import type { SpeechSynthesizer } from '../ports/speech';
import type { MediaLeg, VoiceTransport } from '../ports/voice';

/** A notice on VOICE_CONTROL for one session: inject a text turn, or end (with a reason). */
interface ControlNotice {
  k?: string;
  text?: string;
  reason?: string;
  /** k 'transfer': where to (checked by the transfer_call tool); k 'dtmf': the keys to press (send_digits). */
  target?: string;
  digits?: string;
}

/**
 * What a session's turn needs from the conversation actor: the reply to what the caller said
 * ('' = nothing to say). `onDelta`: the reply's successive chunks as the model writes them
 * (they concatenate to the reply), so its first clause is spoken before the model is done.
 */
export type VoiceTurn = (conv: { id: string; workspaceId: string }, text: string, clientMessageId: string, onDelta?: (chunk: string) => void) => Promise<string>;

export interface VoiceMediaOptions {
  em: EntityManager;
  sessions: VoiceSessionService;
  transport: VoiceTransport;
  stt: SpeechRecognizer;
  tts: SpeechSynthesizer;
  notifications: PgNotifications | null;
  blobs: BlobStore;
  turn: VoiceTurn;
  log: Logger;
  silenceMs: number;
  joinTimeoutMs: number;
  /** No audio from the caller for this long: the session ends (media_timeout). */
  mediaTimeoutMs: number;
  maxMinutes: number;
  onTurn?: (stats: TurnStats) => void;
}

export interface SessionInput {
  voiceSessionId: string;
  workspaceId: string;
  conversationId: string;
}

const GOODBYES: Record<string, string> = {
  out_of_credits: "I'm sorry, we have to end this call now. Thank you for calling.",
  time_limit: "We've reached the time limit for this call. Thank you, goodbye.",
};

/**
 * The worker's side of a voice session: joins the room as the agent, runs the
 * VoiceAgent on the leg with a recorder spooling both sides, hears control notices
 * (inject a text turn, end politely), and ends when the caller leaves, the session is
 * stopped, its time is up or the activity is cancelled. `finish` (possibly on another
 * worker) turns the spool into the three recordings.
 */
export class VoiceMedia {
  constructor(private readonly o: VoiceMediaOptions) {}

  async runSession(input: SessionInput, signal: AbortSignal, heartbeat: (details: unknown) => void): Promise<string> {
    const id = input.voiceSessionId;
    const join = new AbortController();
    const onAbort = () => join.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const joinTimer = setTimeout(() => join.abort(new Error('not_joined')), this.o.joinTimeoutMs);
    const beat = setInterval(() => heartbeat({ phase: 'joining' }), 2000);
    // A stop before the browser joined ends the wait at once (the workflow would otherwise cancel it after its grace).
    let endedWhileJoining: string | null = null;
    const stops = this.controlNotices(id, (notice) => {
      if (notice.k !== 'end') return;
      endedWhileJoining = notice.reason ?? 'stopped';
      join.abort(new Error(endedWhileJoining));
    });
    let leg: MediaLeg;
    try {
      // Best effort: without it a stop still ends the session, by the workflow's cancel after its grace.
      await stops?.start().catch((err: unknown) => this.o.log.warn({ err, id }, 'voice session: stop notices not heard while joining'));
      leg = await this.o.transport.joinAsAgent(id, join.signal);
    } catch (err) {
      if (signal.aborted) return 'cancelled';
      if (endedWhileJoining) return endedWhileJoining;
      if (join.signal.aborted) return 'not_joined';
      throw err;
    } finally {
      clearTimeout(joinTimer);
      clearInterval(beat);
      await stops?.stop();
    }
    // Connected: now it takes a workspace slot; none free (the widget's share is full) ends it unconnected, refunded.
    if (!(await this.o.sessions.markLive(id, input.workspaceId))) {
      await leg.close();
      return 'concurrent_voice_limit_reached';
    }
    return this.converse(id, leg, { id: input.conversationId, workspaceId: input.workspaceId }, signal, heartbeat);
  }

  /** Runs the agent on a connected leg until it ends; the reason. Shared by browser sessions and phone calls. */
  async converse(id: string, leg: MediaLeg, conv: { id: string; workspaceId: string }, signal: AbortSignal, heartbeat: (details: unknown) => void): Promise<string> {
    const recorder = new CallRecorder(new PgRecordingSpool(this.o.em, this.o.blobs, id), { onError: (err) => this.o.log.warn({ err, id }, 'voice recording spool write failed (kept, retried)') });
    let turnNo = 0;
    const agent = new VoiceAgent({
      leg,
      stt: this.o.stt,
      tts: this.o.tts,
      recorder,
      vad: { silenceMs: this.o.silenceMs },
      // Silero VAD and Smart Turn, loaded once per process (npm run models:fetch); without them the energy VAD and the transcript decide.
      models: await turnModels(defaultModelsDir()),
      mediaTimeoutMs: this.o.mediaTimeoutMs,
      log: this.o.log,
      onTurn: this.o.onTurn,
      turn: (text, _source, onDelta) => this.o.turn(conv, text, `${id}:turn:${++turnNo}`, onDelta),
    });
    const sub = this.controlNotices(id, (notice) => {
      if (notice.k === 'inject' && typeof notice.text === 'string') agent.inject(notice.text);
      if (notice.k === 'end') void agent.end(notice.reason ?? 'stopped', GOODBYES[notice.reason ?? '']);
      // The phone's tools (domain/chat/tools/phone.ts): carried out on this leg once the agent's reply has been said.
      const control = notice.k === 'transfer' && typeof notice.target === 'string' ? { k: 'transfer' as const, target: notice.target } : notice.k === 'dtmf' && typeof notice.digits === 'string' ? { k: 'dtmf' as const, digits: notice.digits } : null;
      if (control) {
        void carryOutPhoneControl(leg, control, { spoken: () => agent.spoken(), tell: (t) => agent.inject(t), log: this.o.log }).then(
          (outcome) => this.o.log.info({ id, outcome }, `voice ${control.k}`),
          (err: unknown) => this.o.log.warn({ err, id }, `voice ${control.k} failed`),
        );
      }
    });
    // The caller's keys (RFC 4733 on a phone leg) reach the agent as a text turn: "(the caller pressed 1 0 #)".
    keypadTurns(leg, (t) => agent.inject(t));
    await sub?.start();
    const beat = setInterval(() => heartbeat({ phase: 'live', turns: turnNo }), 2000);
    const limit = setTimeout(() => void agent.end('time_limit', GOODBYES.time_limit), this.o.maxMinutes * 60_000);
    try {
      return await agent.run(signal);
    } finally {
      clearInterval(beat);
      clearTimeout(limit);
      await sub?.stop();
      await recorder.close().catch((err) => this.o.log.warn({ err, id }, 'voice recording: the last chunks could not be spooled'));
    }
  }

  /** The control notices (inject a text, end) of one session or call, from any API process; not started yet. */
  private controlNotices(id: string, on: (notice: ControlNotice) => void): Subscription | undefined {
    return this.o.notifications?.subscribe(
      [VOICE_CONTROL],
      {
        onNotify: (_c, payload) => {
          let notice: ControlNotice & { s?: string };
          try {
            notice = JSON.parse(payload);
          } catch {
            return;
          }
          if (notice.s === id) on(notice);
        },
      },
      `voice session ${id}`,
    );
  }

  /**
   * Saves the recordings of a session or call from its spool (caller, agent, combined
   * stereo; Ogg/Opus) into the blob store and their rows, then drops the spool. Again
   * after a crash: rows already saved are kept (one per kind).
   */
  async finish(owner: { voiceSessionId?: string; callId?: string }, conv: { id: string; workspaceId: string }): Promise<RecordingView[]> {
    const id = (owner.voiceSessionId ?? owner.callId)!;
    const existing = await this.o.sessions.recordingsOf(owner);
    if (existing.length === 3) return existing.map(recordingView);
    const dir = await fs.mkdtemp(path.join((await import('node:os')).tmpdir(), 'concierge-rec-'));
    try {
      const files = await finalizeRecordings(new PgRecordingSpool(this.o.em, this.o.blobs, id), { dir });
      if (!files) return [];
      const out: RecordingView[] = [];
      for (const kind of ['caller', 'agent', 'combined'] as const) {
        const f = files[kind];
        const staged = await this.o.blobs.stage(createReadStream(f.path), 1024 * 1024 * 1024);
        const sha = await this.o.blobs.commit(staged);
        const row = await this.o.sessions.saveRecording({
          workspaceId: conv.workspaceId,
          conversationId: conv.id,
          voiceSessionId: owner.voiceSessionId ?? null,
          callId: owner.callId ?? null,
          kind,
          blobSha256: sha,
          mimeType: f.mime,
          channels: f.channels,
          durationMs: Math.round(f.durationMs),
          bytes: f.bytes,
        });
        out.push(recordingView(row));
      }
      await this.o.sessions.releaseSpool(this.o.blobs, id);
      return out;
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }
}

