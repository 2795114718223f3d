import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApiError } from '../core/errors';
import type { RecordingView } from '../core/voice/sessions';
import { searchAttributesFor } from '../worker/search-attributes';
import { stopVoiceUpdate, voiceSessionWorkflow, voiceWorkflowId, type VoiceSessionInput } from '../workflows/voice';
import { workflowUnavailable } from './uploads';

/** Voice sessions as the API sees them: start `voice:vs_…`, stop it and wait for its recordings. */
export class VoiceGateway {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  async start(input: VoiceSessionInput & { siteId: string | null }): Promise<void> {
    try {
      await this.client.workflow.start(voiceSessionWorkflow, {
        workflowId: voiceWorkflowId(input.voiceSessionId),
        taskQueue: this.taskQueue,
        args: [{ voiceSessionId: input.voiceSessionId, workspaceId: input.workspaceId, conversationId: input.conversationId }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: input.workspaceId }),
        staticSummary: 'browser voice session',
        staticDetails: `Voice session ${input.voiceSessionId} of conversation ${input.conversationId}${input.siteId ? ` (site ${input.siteId})` : ''}: the agent's media activity, minute billing, recordings when it ends.`,
      });
    } catch {
      throw workflowUnavailable('The workflow service could not be reached; start the voice session again');
    }
  }

  /** Ends the session and answers with its recordings (an ended session answers the same). */
  async stop(voiceSessionId: string): Promise<{ ended: true; recordings: RecordingView[] }> {
    const handle = this.client.workflow.getHandle(voiceWorkflowId(voiceSessionId));
    try {
      const { status } = await handle.describe();
      if (status.name !== 'RUNNING') return { ended: true, recordings: (await handle.result()).recordings };
      return await handle.executeUpdate(stopVoiceUpdate);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new ApiError(404, 'not_found', `No voice session '${voiceSessionId}'`);
      // Ended between the two calls: its result has the recordings.
      const done = await handle.result().catch(() => null);
      if (done) return { ended: true, recordings: done.recordings };
      throw workflowUnavailable(`The voice session could not be reached (${(err as Error).message.slice(0, 200)})`);
    }
  }
}
