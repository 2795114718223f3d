import { ActivityFailure, ApplicationFailure, CancellationScope, proxyActivities, proxyLocalActivities, setCurrentDetails, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { TranscribeOutcome, UploadFailure } from '../domain/widget/uploads';
import { cancelled } from './cancellation';
import { recordOutcome } from './outcome';
import { localPresets, presets } from './presets';

const { transcribeVoiceNote } = proxyActivities<Activities>(presets.transcription);
/** Releasing the bytes: a short database read and a delete (a local activity, see short-steps.ts). */
const { releaseVoiceNote } = proxyLocalActivities<Activities>(localPresets.bookkeeping);

/** One workflow per voice note; POST /transcribe waits for it. `id` is a `trn_…` id the API makes up. */
export const transcribeWorkflowId = (id: string) => `transcribe:${id}`;

export interface TranscribeInput {
  /** SHA-256 of the recording: its address in the blob store. */
  blobKey: string;
  /** Its type, decided from the bytes. */
  mime: string;
  /** The note's hold on its bytes (absent in runs started before holds existed). */
  holdId?: string;
  /** The site's workspace: the note's turn in the worker's anonymous lane (absent in runs started before it was passed). */
  workspaceId?: string;
}

/** Failure types of the transcription step (domain/widget/uploads/voice-notes.ts, lib/extract/types.ts). */
const TRANSCRIBER_CREDENTIAL_REFUSED = 'TranscriberCredentialRefused';
const TRANSCRIBER_UNAVAILABLE = 'TranscriberUnavailable';
const MEDIA_TOO_LONG = 'MediaTooLong';

function failureOf(err: unknown): { status: 'error'; failure: UploadFailure; reason: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return { status: 'error', failure: 'transcriber', reason: 'transcription took too long and was stopped' };
  if (cause instanceof ApplicationFailure) {
    if (cause.type === TRANSCRIBER_CREDENTIAL_REFUSED) return { status: 'error', failure: 'transcriber_credential', reason: cause.message };
    if (cause.type === TRANSCRIBER_UNAVAILABLE) return { status: 'error', failure: 'transcriber', reason: cause.message };
    if (cause.type === MEDIA_TOO_LONG) return { status: 'error', failure: 'too_long', reason: cause.message };
    if (cause.type === 'ExtractionError' || cause.type === 'ExtractionCrash') return { status: 'error', failure: 'unreadable', reason: cause.message };
  }
  return { status: 'error', failure: 'internal', reason: 'transcription failed after retries (internal error); see the transcribe workflow in the Temporal UI' };
}

/**
 * A widget voice note to text (`transcribe:trn_…`): the worker reads the recording from
 * the blob store and transcribes it (the embedded whisper.cpp, one at a time per worker,
 * or the configured HTTP service), while POST /transcribe waits; then the bytes are
 * released, whatever the outcome: a voice note is not kept.
 */
export async function transcribeWorkflow(input: TranscribeInput): Promise<TranscribeOutcome> {
  try {
    setCurrentDetails(`Transcribing a voice note (${input.mime}); the visitor's POST /transcribe is waiting.`);
    const transcript = await transcribeVoiceNote.executeWithOptions({ ...presets.transcription, summary: `transcribe (${input.mime})` }, [input.blobKey, input.mime, input.workspaceId]);
    setCurrentDetails(transcript ? 'Transcribed.' : 'No speech found.');
    recordOutcome('succeeded');
    return { status: 'done', transcript };
  } catch (err) {
    const outcome = failureOf(err);
    const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
    setCurrentDetails(`Failed (${outcome.failure}): ${(cause as Error).message}`);
    // A cancelled run still completes here (its caller reads the error); the attribute tells the two apart.
    recordOutcome(cancelled(err) ? 'cancelled' : 'failed');
    return outcome;
  } finally {
    // Also when the run is cancelled: the recording is not kept either way.
    await CancellationScope.nonCancellable(() => releaseVoiceNote.executeWithOptions({ ...localPresets.bookkeeping, summary: 'release the recording' }, [input.blobKey, input.holdId]));
  }
}
