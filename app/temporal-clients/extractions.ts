import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { DomainError } from '../../domain/errors';
import type { Begun, ExtractionOutcome } from '../../domain/extraction/extractions';
import { searchAttributesFor } from './search-attributes';
import { structuredExtractionWorkflow, structuredExtractionWorkflowId } from '../../workflows/structured-extraction';
import { workflowUnavailable } from './uploads';
import type { ExtractionRuns } from '../../domain/ports/workflow-runs';

/** How long POST /documents/extract_structured waits by default (STRUCTURED_WAIT_MS). */
export const DEFAULT_EXTRACT_WAIT_MS = 300_000;

/**
 * Structured extractions as the API sees them: the request starts (or joins, for the same
 * request already running) `extract:ext_…` and waits for it, up to `waitMs`; past that
 * 504 extraction_timeout with the workflow id, and the run goes on: the same request
 * later is answered from its stored result.
 */
export class ExtractionWorkflows implements ExtractionRuns {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    private readonly eagerStart = false,
    private readonly waitMs = DEFAULT_EXTRACT_WAIT_MS,
  ) {}

  async run(run: Extract<Begun, { kind: 'run' }>): Promise<ExtractionOutcome> {
    const workflowId = structuredExtractionWorkflowId(run.id);
    let handle: WorkflowHandle<typeof structuredExtractionWorkflow>;
    try {
      handle = await this.client.workflow.start(structuredExtractionWorkflow, {
        workflowId,
        taskQueue: this.taskQueue,
        requestEagerStart: this.eagerStart,
        args: [{ extractionId: run.id }],
        // The file's SHA-256 as its id: an operator finds every extraction of one file.
        typedSearchAttributes: searchAttributesFor({ workspaceId: run.workspaceId, fileId: run.fileSha256 }),
        staticSummary: `${run.fileName} (${run.mimeType})`,
        staticDetails: `Structured extraction ${run.id} of workspace ${run.workspaceId}: ${run.mimeType}, ${run.size} bytes, SHA-256 ${run.fileSha256}.`,
      });
    } catch (err) {
      // The same request already running (another caller, or this one's retry after a 504): wait for that run.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw workflowUnavailable('The workflow service could not be reached; send the request again');
      handle = this.client.workflow.getHandle(workflowId);
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), this.waitMs);
    });
    try {
      const outcome = await Promise.race([handle.result(), late]);
      if (outcome === 'late') {
        throw new DomainError(
          'extraction_timeout',
          `The extraction did not finish within ${Math.round(this.waitMs / 1000)} s; it goes on: send the same request again later for its result`,
          { workflow_id: workflowId, extraction_id: run.id },
        );
      }
      return outcome;
    } catch (err) {
      if (err instanceof DomainError) throw err;
      throw new DomainError('workflow_unavailable', 'The extraction workflow could not be followed to its end; send the same request again for its result', { workflow_id: workflowId, extraction_id: run.id });
    } finally {
      clearTimeout(timer);
    }
  }
}
