import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { DomainError } from '../../domain/errors';
import type { RecordingView } from '../../domain/voice/sessions';
import { searchAttributesFor } from './search-attributes';
import { stopVoiceUpdate, voiceSessionWorkflow, voiceWorkflowId, type VoiceSessionInput } from '../../workflows/voice';
import { callWorkflow, callWorkflowId, type CallInput } from '../../workflows/call';
import { workflowUnavailable } from './uploads';
import type { CallRuns, VoiceSessionRuns } from '../../domain/ports/workflow-runs';

/** Voice sessions and calls as the API sees them: start `voice:vs_…`, stop it and wait for its recordings; start `call:call_…`, hang it up. */
export class VoiceWorkflows implements CallRuns, VoiceSessionRuns {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  async start(input: VoiceSessionInput & { siteId: string | null }): Promise<void> {
    try {
      await this.client.workflow.start(voiceSessionWorkflow, {
        workflowId: voiceWorkflowId(input.voiceSessionId),
        taskQueue: this.taskQueue,
        args: [{ voiceSessionId: input.voiceSessionId, workspaceId: input.workspaceId, conversationId: input.conversationId, ...(input.billingPeriodSeconds ? { billingPeriodSeconds: input.billingPeriodSeconds } : {}) }],
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
      // An update to a run that closed meanwhile fails as not found: only a run that does not exist is a 404.
      const state = await handle.describe().then(
        (d) => d.status.name,
        (e: unknown) => (e instanceof WorkflowNotFoundError ? 'NOT_FOUND' : null),
      );
      if (state === 'NOT_FOUND') throw new DomainError('not_found', `No voice session '${voiceSessionId}'`);
      // Ended between the two calls: its result has the recordings.
      const done = state && state !== 'RUNNING' ? await handle.result().catch(() => null) : null;
      if (done) return { ended: true, recordings: done.recordings };
      throw workflowUnavailable(`The voice session could not be reached (${(err as Error).message.slice(0, 200)})`);
    }
  }

  /** Places a dial-out call: its `call:call_…` workflow dials and runs the agent. */
  async startCall(input: CallInput & { siteId: string | null }): Promise<void> {
    try {
      await this.client.workflow.start(callWorkflow, {
        workflowId: callWorkflowId(input.callId),
        taskQueue: this.taskQueue,
        args: [{ callId: input.callId, workspaceId: input.workspaceId, conversationId: input.conversationId, phone: input.phone }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: input.workspaceId }),
        staticSummary: 'dial-out call',
        staticDetails: `Call ${input.callId} of conversation ${input.conversationId}${input.siteId ? ` (site ${input.siteId})` : ''}: the dial, the agent on the call, minute billing, recordings when it ends.`,
      });
    } catch {
      throw workflowUnavailable('The workflow service could not be reached; place the call again');
    }
  }

  /** Hangs up a call (cancels its workflow, which hangs up and saves the recordings); an ended call is left as it is. */
  async hangUp(callId: string): Promise<void> {
    await this.client.workflow
      .getHandle(callWorkflowId(callId))
      .cancel()
      .catch((err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      });
  }

  /** Waits up to `timeoutMs` for the call's workflow to close, however it ended; false when it still runs. */
  async ended(callId: string, timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const closed = this.client.workflow
      .getHandle(callWorkflowId(callId))
      .result()
      .then(
        () => true,
        // Failed, cancelled or never started: closed all the same (the row says how).
        () => true,
      );
    try {
      return await Promise.race([closed, new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
    } finally {
      clearTimeout(timer);
    }
  }
}
