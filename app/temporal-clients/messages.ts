import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type Client } from '@temporalio/client';
import { CancelledFailure, TerminatedFailure } from '@temporalio/common';
import type { SendPlan } from '../../domain/messaging/plan';
import { searchAttributesFor } from './search-attributes';
import { messageSendSummary, messageSendWorkflow, messageSendWorkflowId, SEND_CANCELLED, type MessageSendResult } from '../../workflows/message-send';
import type { MessageRuns } from '../../domain/ports/workflow-runs';

/** Outbound msgapp sends as the API sees them: one `message-send:<id>` workflow per message, waited for. */
export class MessageWorkflows implements MessageRuns {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    /** Ask for eager start: only when the client shares a native connection with this process's worker (app/temporal-clients/index.ts). */
    private readonly eagerStart = false,
  ) {}

  /**
   * Starts the send and waits for its outcome. A send an operator cancelled is a failed
   * send (its message reads `failed` with SEND_CANCELLED); a terminated one too (the
   * maintenance reconciliation marks its message failed within minutes).
   */
  async send(plan: SendPlan, opts: { once?: boolean } = {}): Promise<MessageSendResult> {
    try {
      return await this.client.workflow.execute(messageSendWorkflow, {
        workflowId: messageSendWorkflowId(plan.messageId),
        // `once`: an agent's reply is sent by one run ever; a repeat waits for that run's outcome.
        ...(opts.once ? { workflowIdReusePolicy: 'REJECT_DUPLICATE' as const } : {}),
        taskQueue: this.taskQueue,
        requestEagerStart: this.eagerStart,
        args: [plan],
        // An operator filtering by workspace in the UI finds the workspace's sends too.
        typedSearchAttributes: searchAttributesFor({ workspaceId: plan.workspaceId }),
        staticSummary: messageSendSummary(plan),
        staticDetails: `Message ${plan.messageId} from ${plan.fromNumber} (agent ${plan.agentId}).`,
      });
    } catch (err) {
      if (opts.once && err instanceof WorkflowExecutionAlreadyStartedError) return this.client.workflow.getHandle(messageSendWorkflowId(plan.messageId)).result() as Promise<MessageSendResult>;
      if (err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure) return { status: 'failed', error: SEND_CANCELLED };
      if (err instanceof WorkflowFailedError && err.cause instanceof TerminatedFailure) return { status: 'failed', error: 'the send was terminated by an operator' };
      throw err;
    }
  }
}
