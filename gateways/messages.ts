import type { Client } from '@temporalio/client';
import type { SendPlan } from '../core/messages/plan';
import { searchAttributesFor } from '../worker/search-attributes';
import { messageSendWorkflow, messageSendWorkflowId, type MessageSendResult } from '../workflows/message-send';

/** Outbound msgapp sends as the API sees them: one `message-send:<id>` workflow per message, waited for. */
export class MessageSender {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  send(plan: SendPlan): Promise<MessageSendResult> {
    return this.client.workflow.execute(messageSendWorkflow, {
      workflowId: messageSendWorkflowId(plan.messageId),
      taskQueue: this.taskQueue,
      args: [plan],
      // An operator filtering by workspace in the UI finds the workspace's sends too.
      typedSearchAttributes: searchAttributesFor({ workspaceId: plan.workspaceId }),
    });
  }
}

