import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';

/**
 * Activity options named by intent: every `proxyActivities` in workflows/ takes one of
 * these, so timeouts and retry policies are decided here, once. Whether a failure is
 * final is not decided here either: an activity's error says so itself (activities/errors.ts).
 */
export const presets = {
  /** A short database write a caller is waiting on: retried for about a minute, then the workflow sees the failure. */
  dbWrite: {
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds', maximumAttempts: 10 },
  },
  /** Bookkeeping that must land eventually (a file's status, a delivery's outcome): retried until it does. */
  bookkeeping: {
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
  },
  /**
   * The agent's turn: model calls stream for a while, so a lost worker is noticed by the
   * missing heartbeat, not by the overall timeout. A retry finds a stored reply and only
   * re-announces it.
   */
  agentTurn: {
    startToCloseTimeout: '3 minutes',
    heartbeatTimeout: '10 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 4 },
  },
  /**
   * Extraction runs in a child process with its own limits; these bound the whole step,
   * retries included. The activity heartbeats every 5 s while the process runs: a lost
   * worker is noticed within 20 s.
   */
  longExtraction: {
    startToCloseTimeout: '15 minutes',
    scheduleToCloseTimeout: '40 minutes',
    heartbeatTimeout: '20 seconds',
    retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
  },
  /** Embedding a file's passages: heartbeats after every batch of 32 (well under a second each). */
  embedding: {
    startToCloseTimeout: '30 minutes',
    scheduleToCloseTimeout: '90 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
  },
  /** A visitor's long upload read into passages (chunk and embed), heartbeating while it runs. */
  uploadIndexing: {
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 3 },
  },
  /** One call to a messaging provider: retried only while the failure is transient (5xx, 429, transport). */
  providerCall: {
    startToCloseTimeout: '20 seconds',
    scheduleToCloseTimeout: '2 minutes',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 5 },
  },
  /**
   * An inbound message's media from the provider: heartbeats every 5 s while it downloads,
   * so a lost worker is noticed within 15 s and another downloads it again; retried only
   * while the failure is transient.
   */
  mediaDownload: {
    startToCloseTimeout: '3 minutes',
    scheduleToCloseTimeout: '15 minutes',
    heartbeatTimeout: '15 seconds',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 5 },
  },
  /**
   * A visitor's upload read into text while the visitor waits (POST /upload): the
   * extraction process's own limits, a heartbeat every 5 s (a lost worker is noticed
   * within 20 s and another extracts again), and one retry only.
   */
  uploadExtraction: {
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '20 seconds',
    retry: { initialInterval: '1 second', maximumAttempts: 2 },
  },
  /**
   * A live voice session's media (the agent's peer, VAD, STT, turns, TTS, the recorder):
   * as long as the call (VOICE_MAX_MINUTES, plus the join window), a heartbeat every 2 s,
   * never retried: the visitor's connection was to that worker; a lost worker (no
   * heartbeat for 15 s) ends the session, whose recordings are then saved from the spool.
   */
  voiceMedia: {
    startToCloseTimeout: '3 hours',
    heartbeatTimeout: '15 seconds',
    retry: { maximumAttempts: 1 },
  },
  /** Recordings encoded from the spool (ffmpeg) and stored: a minute or so for an hour's call. */
  recordingSave: {
    startToCloseTimeout: '10 minutes',
    retry: { initialInterval: '2 seconds', maximumAttempts: 3 },
  },
  /**
   * A voice note transcribed while the visitor waits (POST /transcribe): the transcriber
   * limits itself (the embedded one: TRANSCRIBE_MAX_SECONDS of audio, a deadline of twice
   * its length, one transcription at a time per worker, whose wait counts here); a
   * heartbeat every 5 s (a lost worker is noticed within 20 s and another transcribes
   * again), and one retry only.
   */
  transcription: {
    startToCloseTimeout: '25 minutes',
    heartbeatTimeout: '20 seconds',
    retry: { initialInterval: '1 second', maximumAttempts: 2 },
  },
  /**
   * One model call of a structured extraction (the answer for one chunk, and its repair
   * turn): a local model on 2 cores takes 10 to 30 s, each call has its own deadline
   * (STRUCTURED_TIMEOUT_MS, 3 minutes by default), so this bounds the two calls of one
   * attempt. A heartbeat every 5 s: a lost worker is noticed within 30 s. Failures of
   * the model server (unreachable, 5xx, time-outs) are retried twice; a refusal (4xx) is not.
   */
  modelCall: {
    startToCloseTimeout: '8 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumAttempts: 3 },
  },
  /**
   * An agent's reply sent through its message-send workflow, waited for (the provider's
   * own retries last about 2 minutes): a heartbeat every 5 s, so a lost worker is noticed
   * within 20 s and the next attempt waits for the same send (never a second one).
   */
  replySend: {
    startToCloseTimeout: '5 minutes',
    heartbeatTimeout: '20 seconds',
    retry: { initialInterval: '1 second', maximumAttempts: 5 },
  },
  /** Short database housekeeping: retried a few times, never for long. */
  maintenance: {
    startToCloseTimeout: '2 minutes',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 5 },
  },
} satisfies Record<string, ActivityOptions>;

/**
 * Local-activity options named by intent, for the short database steps (see
 * workflows/short-steps.ts): run by the worker that runs the workflow task, recorded
 * as a marker when that task completes, with no activity task for the server to queue
 * and dispatch. Retries back off inside the worker up to `localRetryThreshold`; longer
 * waits become server timers, so a long database outage never holds a workflow task
 * open. A worker lost mid-step is replaced by the next workflow task, which runs the
 * step again: every step named here is idempotent.
 */
export const localPresets = {
  /** The local counterpart of `dbWrite`: a caller is waiting; about a minute of retries, then the workflow sees the failure. */
  dbWrite: {
    startToCloseTimeout: '10 seconds',
    retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds', maximumAttempts: 10 },
    localRetryThreshold: '5 seconds',
  },
  /** The local counterpart of `bookkeeping`: must land eventually, so retried until it does (waits past 5 s on server timers). */
  bookkeeping: {
    startToCloseTimeout: '10 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
    localRetryThreshold: '5 seconds',
  },
} satisfies Record<string, LocalActivityOptions>;

/**
 * One attempt and no Temporal retry: the workflow owns the schedule (webhook deliveries).
 * The attempt's own time-out plus room to log it; an attempt that dies with its worker
 * times out and counts as a failed attempt.
 */
export const singleAttempt = (timeoutMs: number): ActivityOptions => ({ startToCloseTimeout: timeoutMs + 5_000, retry: { maximumAttempts: 1 } });
