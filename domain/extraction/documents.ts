import type { StagedBlob } from '../ports/blob-store';
import { noWorkflowService, type ExtractionRuns } from '../ports/workflow-runs';
import type { ExtractionAnswer, StructuredExtractionService } from './extractions';

/** The request's document and its form, read by the route once the checks that need no byte have passed (the staged blob is then the service's). */
export interface ReceivedDocument {
  staged: StagedBlob;
  fileName: string;
  schema: string | undefined;
  prompt: string | undefined;
}

export interface DocumentExtractionsDeps {
  structured: Pick<StructuredExtractionService, 'begin' | 'answer'>;
  /** The structured extraction workflow's client; null in a process without a workflow service. */
  runs: () => ExtractionRuns | null;
}

/**
 * POST /api/v1/documents/extract_structured end to end: the request checked and recorded
 * (or answered from the stored result of the same file, schema and prompt), its
 * `extract:ext_…` workflow run and waited for, and the recorded answer.
 */
export class DocumentExtractions {
  constructor(private readonly deps: DocumentExtractionsDeps) {}

  async extract(workspaceId: string, read: () => Promise<ReceivedDocument>): Promise<ExtractionAnswer> {
    // Refused before a byte is read when this process has no workflow service to run it on.
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    const begun = await this.deps.structured.begin(workspaceId, await read());
    if (begun.kind === 'stored') return begun.answer;
    // The row holds the answer (or why there is none); the workflow's outcome only says it is settled.
    await runs.run(begun);
    return this.deps.structured.answer(workspaceId, begun.id);
  }
}
