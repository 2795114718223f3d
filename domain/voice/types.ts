/**
 * Voice: the shapes shared by the transports (direct WebRTC, LiveKit, SIP), the media
 * pipeline (VAD → STT → the conversation actor's turn → TTS) and the recorder.
 *
 * Audio inside the service is 16-bit signed PCM, mono, at MEDIA_RATE (8 kHz, 20 ms
 * frames of 160 samples): what G.711 carries on the direct WebRTC leg (PCMU) and on SIP
 * trunks, so every leg speaks one format. Speech-to-text upsamples to 16 kHz; LiveKit's
 * agent leg resamples at its edge.
 */

/** Samples per second of every PCM frame that crosses a MediaLeg. */
export const MEDIA_RATE = 8000;
/** One frame: 20 ms. */
export const FRAME_SAMPLES = 160;
export const FRAME_MS = 20;

export type TransportKind = 'livekit' | 'direct';

/** What /voice/start hands the browser (the contract's voice-session fields plus `transport`). */
export interface VoiceRoom {
  transport: TransportKind;
  room_name: string;
  rtc_url: string;
  rtc_token: string;
}

/** The transcript frame of the contract, sent on the data channel / topic `transcript`. */
export interface TranscriptFrame {
  type: 'transcript';
  speaker: 'user' | 'assistant';
  text: string;
  /** Milliseconds since the epoch. */
  timestamp: number;
  partial: boolean;
}

/**
 * The agent's side of one live call: audio in and out as MEDIA_RATE frames, plus the
 * data channel for transcript frames. Transport-independent: the pipeline only sees this.
 */
export interface MediaLeg {
  /** Called for each 20 ms frame the remote party sends (MEDIA_RATE, mono). */
  onAudio(listener: (frame: Int16Array) => void): void;
  /** Queues agent audio (any length, MEDIA_RATE mono); it is paced out in real time. */
  play(samples: Int16Array): void;
  /** Drops queued agent audio at once (barge-in). */
  clearPlayback(): void;
  /** Whether queued agent audio is still being played. */
  readonly playing: boolean;
  /** Observes agent audio as it is actually sent (the recorder's agent track): frames cut by barge-in never appear. */
  onPlayed(listener: (frame: Int16Array) => void): void;
  /** Sends a transcript frame (data channel labelled/topic `transcript`); dropped if the channel is not open. */
  sendTranscript(frame: TranscriptFrame): void;
  /** Resolves when the remote side leaves or the connection is lost, with a reason. */
  readonly ended: Promise<string>;
  close(): Promise<void>;
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
