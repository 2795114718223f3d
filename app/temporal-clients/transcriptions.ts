import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import type { TranscribeOutcome, VoiceNote } from '../../domain/widget/uploads';
import { searchAttributesFor } from './search-attributes';
import { transcribeWorkflow, transcribeWorkflowId } from '../../workflows/transcribe';
import { workflowUnavailable } from './uploads';
import type { TranscriptionRuns } from '../../domain/ports/workflow-runs';

/**
 * Voice notes as the API sees them: POST /transcribe starts `transcribe:<trn_id>` (the
 * transcription runs in the worker, never in the API process) and waits for its outcome.
 */
export class TranscriptionWorkflows implements TranscriptionRuns {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    /** Ask for eager start: only when the client shares a native connection with this process's worker (app/temporal-clients/index.ts). */
    private readonly eagerStart = false,
  ) {}

  /**
   * Starts the note's transcription and waits for it. When the workflow cannot be started
   * (Temporal unreachable) `notStarted` runs (the route releases the bytes) and the answer
   * is 503 workflow_unavailable; a connection lost while waiting is 503 too (the workflow
   * still releases the bytes when it ends).
   */
  async transcribe(note: VoiceNote, site: { id: string; workspace_id: string }, notStarted: () => Promise<void>): Promise<TranscribeOutcome> {
    // The note's hold is named after its transcription (storeVoiceNote): the reconciliation finds what a terminated run left.
    const workflowId = transcribeWorkflowId(note.holdId);
    let handle: WorkflowHandle<typeof transcribeWorkflow>;
    try {
      handle = await this.client.workflow.start(transcribeWorkflow, {
        workflowId,
        taskQueue: this.taskQueue,
        requestEagerStart: this.eagerStart,
        args: [{ blobKey: note.blobKey, mime: note.mime, holdId: note.holdId, workspaceId: site.workspace_id }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: site.workspace_id }),
        staticSummary: `voice note (${note.mime})`,
        staticDetails: `A voice note of site ${site.id}: ${note.mime}, ${note.size} bytes.`,
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
        await notStarted();
        throw workflowUnavailable('The workflow service could not be reached; send the voice note again');
      }
      handle = this.client.workflow.getHandle(workflowId);
    }
    try {
      return await handle.result();
    } catch {
      throw workflowUnavailable('The connection to the workflow service was lost while transcribing; send the voice note again');
    }
  }
}
