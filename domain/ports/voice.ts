/**
 * Voice's ports: what the domain asks of a voice transport (direct WebRTC, LiveKit) and of
 * telephony (LiveKit SIP, a SIP trunk), implemented under providers/ and wired in app/voice.ts.
 * The media leg itself and the audio format are lib/audio/media-leg.ts.
 */
import type { MediaLeg } from '../../lib/audio/media-leg';
import { OperationalError } from '../../lib/failures';

export { FRAME_MS, FRAME_SAMPLES, MEDIA_RATE, type MediaLeg, type TranscriptFrame } from '../../lib/audio/media-leg';

/** Postgres channel of the direct transport's signalling: `offer:<room>` when a browser's offer is stored. */
export const VOICE_SIGNALS = 'voice_signals';

/** Where the direct transport reads a browser's SDP offer and leaves its answer (the voice session's row). */
export interface VoiceSignalling {
  offer(room: string): Promise<string | null>;
  putAnswer(room: string, answerSdp: string): Promise<void>;
}


export type TransportKind = 'livekit' | 'direct';

/** What /voice/start hands the browser (the contract's voice-session fields plus `transport`). */
export interface VoiceRoom {
  transport: TransportKind;
  room_name: string;
  rtc_url: string;
  rtc_token: string;
}

export interface CreateRoomInput {
  voiceSessionId: string;
  workspaceId: string;
  /** The visitor's identity in the room (customer id). */
  identity: string;
  /** How long the browser's token is valid for joining. */
  ttlSeconds: number;
}

export interface DialOutInput {
  callId: string;
  workspaceId: string;
  /** E.164. */
  to: string;
  room_name: string;
}

export interface VoiceTransport {
  readonly kind: TransportKind;
  /** Creates the room (or its record) and mints the browser's join token. */
  createRoom(input: CreateRoomInput): Promise<VoiceRoom>;
  /**
   * Joins the room as the agent (in the worker's media activity) and resolves once a
   * remote party is connected, or rejects when `signal` aborts first.
   */
  joinAsAgent(room: string, signal: AbortSignal): Promise<MediaLeg>;
  /** Removes the room; an unknown room is not an error. */
  deleteRoom(room: string): Promise<void>;
}

/** A phone-call leg: dials out and, once answered, is a MediaLeg like any other. */
export interface Telephony {
  readonly kind: 'livekit-sip' | 'sip';
  /** Places the call; progress callbacks as the remote side rings and answers. */
  dial(input: DialOutInput, progress: (status: 'ringing' | 'in_progress') => void, signal: AbortSignal): Promise<MediaLeg>;
}

/** Outcome statuses of a dial-out call (the call workflow's terminal states). */
export type CallEnd = 'completed' | 'failed' | 'no_answer' | 'busy';

/** A dial-out that ended before it was answered, with the call's terminal status. */
export class DialFailed extends OperationalError {
  constructor(
    readonly status: Exclude<CallEnd, 'completed'>,
    message: string,
    readonly sipStatusCode?: number,
  ) {
    // Never retried by itself: a second attempt is a second phone call.
    super('DialFailed', message, false);
  }
}

/**
 * The SIP final response of a failed dial as the call's status: busy (486 Busy Here,
 * 600 Busy Everywhere, 603 Decline), no answer (408 Request Timeout, 480 Temporarily
 * Unavailable, 487 Request Terminated: the ringing timeout ran out), anything else failed.
 */
export function dialStatus(sipStatusCode: number | undefined): Exclude<CallEnd, 'completed'> {
  if (sipStatusCode === 486 || sipStatusCode === 600 || sipStatusCode === 603) return 'busy';
  if (sipStatusCode === 408 || sipStatusCode === 480 || sipStatusCode === 487) return 'no_answer';
  return 'failed';
}

/** Why voice chat or dial-out cannot run here (null: it can); init reports these in capability_warnings, start answers 503 with them. */
export interface VoicePrereqs {
  voice: string | null;
  dialOut: string | null;
}
