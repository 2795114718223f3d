import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, createdAtMs, p, updatedAt } from './common';

/** A browser voice session (`vs_…`): one room, one `voice:` workflow. */
export const VoiceSession = defineEntity({
  name: 'VoiceSession',
  tableName: 'voice_sessions',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    siteId: p.text().nullable(),
    conversationId: p.text(),
    agentId: p.text(),
    customerId: p.text().nullable(),
    transport: p.enum(['direct', 'livekit'] as const).columnType('text'),
    roomName: p.text(),
    status: p.enum(['starting', 'live', 'ended', 'failed'] as const).columnType('text'),
    endReason: p.text().nullable(),
    offerSdp: p.text().nullable(),
    answerSdp: p.text().nullable(),
    creditsSpent: p.integer().default(0),
    connectedAt: p.datetime().nullable(),
    endedAt: p.datetime().nullable(),
    durationMs: p.integer().nullable(),
    /** Who started it (the customer, else the conversation) and from where: the per-visitor and per-address caps. */
    visitorKey: p.text().nullable(),
    clientAddress: p.text().nullable(),
    /** Set by the first signalling socket that joins: the rtc_token is single-use. */
    rtcClaimedAt: p.datetime().nullable(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
});
export type IVoiceSession = InferEntity<typeof VoiceSession>;

export type CallStatus = 'calling' | 'ringing' | 'in_progress' | 'completed' | 'failed' | 'no_answer' | 'busy';

/** A dial-out phone call (`call_…`), moved by its `call:` workflow. */
export const Call = defineEntity({
  name: 'Call',
  tableName: 'calls',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    conversationId: p.text(),
    agentId: p.text(),
    siteId: p.text().nullable(),
    direction: p.enum(['outbound'] as const).columnType('text').default('outbound'),
    phone: p.text(),
    provider: p.text(),
    status: p.enum(['calling', 'ringing', 'in_progress', 'completed', 'failed', 'no_answer', 'busy'] as const).columnType('text'),
    statusHistory: p.json<Array<{ status: CallStatus; at: string }>>().default([]),
    error: p.text().nullable(),
    creditsSpent: p.integer().default(0),
    /** What the number is priced as (fixed, mobile, other) and what a minute costs: fixed when the call is placed. */
    destinationClass: p.enum(['fixed', 'mobile', 'other'] as const).columnType('text').nullable(),
    creditsPerMinute: p.integer().nullable(),
    answeredAt: p.datetime().nullable(),
    endedAt: p.datetime().nullable(),
    durationMs: p.integer().nullable(),
    /** Who answered (answering-machine detection; null: the call was not screened). */
    answeredBy: p.enum(['human', 'machine', 'unknown'] as const).columnType('text').nullable(),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
  },
});
export type ICall = InferEntity<typeof Call>;

/** One saved recording of a session or call: caller, agent, or the combined stereo mix. */
export const Recording = defineEntity({
  name: 'Recording',
  tableName: 'recordings',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    conversationId: p.text(),
    voiceSessionId: p.text().nullable(),
    callId: p.text().nullable(),
    kind: p.enum(['caller', 'agent', 'combined'] as const).columnType('text'),
    blobSha256: p.text(),
    mimeType: p.text(),
    channels: p.integer(),
    durationMs: p.integer(),
    bytes: p.bigint('number'),
    createdAt: createdAt(),
  },
});
export type IRecording = InferEntity<typeof Recording>;

/** A spooled piece of a live recording (PCM in the blob store), kept until the recording is saved. */
export const VoiceRecordingChunk = defineEntity({
  name: 'VoiceRecordingChunk',
  tableName: 'voice_recording_chunks',
  properties: {
    sessionId: p.text().primary(),
    track: p.enum(['caller', 'agent'] as const).columnType('text').primary(),
    seq: p.integer().primary(),
    startSample: p.bigint('number'),
    blobSha256: p.text(),
    createdAt: createdAt(),
  },
});
export type IVoiceRecordingChunk = InferEntity<typeof VoiceRecordingChunk>;

/**
 * A worker that runs voice: how many sessions and calls it carries at once (VOICE_WORKER_CAPACITY), reported every
 * few seconds. The installation's voice capacity is the sum over the workers heard from lately (domain/voice/sessions.ts).
 */
export const VoiceWorker = defineEntity({
  name: 'VoiceWorker',
  tableName: 'voice_workers',
  properties: {
    id: p.text().primary(),
    capacity: p.integer(),
    heartbeatAt: p.datetime(),
    startedAt: p.datetime(),
  },
});
export type IVoiceWorker = InferEntity<typeof VoiceWorker>;
