import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { DomainError } from '../../domain/errors';
import type { StoredUpload, UploadOutcome } from '../../domain/widget/uploads';
import { searchAttributesFor } from './search-attributes';
import { UPLOAD_CANCELLED, widgetUploadWorkflow, widgetUploadWorkflowId } from '../../workflows/widget-upload';
import type { UploadRuns } from '../../domain/ports/workflow-runs';

/** 503 when this API process has no workflow service to run extraction on (the widget send's code). */
export const workflowUnavailable = (detail = 'The workflow service is not connected to this API process') => new DomainError('workflow_unavailable', detail);

/**
 * Widget uploads as the API sees them: POST /upload starts `widget-upload:<upload_id>`
 * (extraction runs in the worker) and waits for its outcome.
 */
export class UploadWorkflows implements UploadRuns {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    /** Ask for eager start: only when the client shares a native connection with this process's worker (app/temporal-clients/index.ts). */
    private readonly eagerStart = false,
  ) {}

  /**
   * Starts the upload's extraction and waits for it. When the workflow cannot be started
   * (Temporal unreachable) `notStarted` runs (the route marks the upload error) and the
   * answer is 503 workflow_unavailable. Once started, the upload is Temporal's: a
   * connection lost while waiting is 503 workflow_unavailable too, and the upload still
   * ends ready or error (GET /upload/{upload_id} reads it).
   */
  async extract(stored: StoredUpload, notStarted: () => Promise<void>): Promise<UploadOutcome> {
    const workflowId = widgetUploadWorkflowId(stored.row.id);
    let handle: WorkflowHandle<typeof widgetUploadWorkflow>;
    try {
      handle = await this.client.workflow.start(widgetUploadWorkflow, {
        workflowId,
        taskQueue: this.taskQueue,
        requestEagerStart: this.eagerStart,
        args: [{ uploadId: stored.row.id, kind: stored.kind }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: stored.row.workspace_id }),
        staticSummary: `${stored.row.file_name} (${stored.kind})`,
        staticDetails: `Upload ${stored.row.id} of site ${stored.row.site_id}${stored.row.conversation_id ? `, conversation ${stored.row.conversation_id}` : ''}: ${stored.row.mime_type}, ${stored.row.size_bytes} bytes.`,
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
        await notStarted();
        throw workflowUnavailable('The workflow service could not be reached; upload the file again');
      }
      handle = this.client.workflow.getHandle(workflowId);
    }
    try {
      return await handle.result();
    } catch (err) {
      // Cancelled by an operator: the workflow recorded the upload in error with the reason; say so, not "still processing".
      if (err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure) {
        throw new DomainError('upload_cancelled', `The upload's ${UPLOAD_CANCELLED}`, { upload_id: stored.row.id });
      }
      throw new DomainError('workflow_unavailable', 'The upload is still processing; read its status with GET /upload/{upload_id}', { upload_id: stored.row.id });
    }
  }
}
