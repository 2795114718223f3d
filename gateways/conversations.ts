import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ApiError } from '../core/errors';
import { searchAttributesFor } from '../worker/search-attributes';
import {
  cancelTaskUpdate,
  closeSignal,
  CONVERSATION_CLOSED,
  conversationWorkflow,
  conversationWorkflowId,
  visitorMessageUpdate,
  type VisitorMessage,
  type VisitorMessageResult,
} from '../workflows/conversation';

/** Workflow failure types and the API errors they become: matched on the failure's type, never its text. */
const API_ERRORS: Record<string, () => ApiError> = {
  [CONVERSATION_CLOSED]: () => new ApiError(409, 'conversation_closed', 'This conversation is closed; start a new one with conversations/new'),
};

/** The API error a failed update stands for, when its failure type has one; else the error itself. */
export function apiErrorOf(err: unknown): unknown {
  const cause = err instanceof WorkflowUpdateFailedError ? err.cause : err;
  if (cause instanceof ApplicationFailure && cause.type && API_ERRORS[cause.type]) return API_ERRORS[cause.type]();
  return err;
}

/**
 * The conversation actor as the API sees it: every start, update and signal of the
 * `conversation:<id>` workflow goes through here, so routes never touch Temporal.
 */
export class ConversationGateway {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  /** Records a visitor message with the actor (started if it is not running) and, for sync delivery, waits for the reply. */
  async send(conv: { id: string; workspaceId: string }, message: VisitorMessage): Promise<VisitorMessageResult> {
    return this.client.workflow
      .executeUpdateWithStart(visitorMessageUpdate, {
        args: [message],
        startWorkflowOperation: new WithStartWorkflowOperation(conversationWorkflow, {
          workflowId: conversationWorkflowId(conv.id),
          taskQueue: this.taskQueue,
          args: [{ conversationId: conv.id, workspaceId: conv.workspaceId }],
          workflowIdConflictPolicy: 'USE_EXISTING',
          typedSearchAttributes: searchAttributesFor({ workspaceId: conv.workspaceId }),
        }),
      })
      .catch((err: unknown) => {
        throw apiErrorOf(err);
      });
  }

  /** Tells the actors of conversations closed in the database to finish (none running: nothing to do). */
  async closed(conversationIds: string[]): Promise<void> {
    for (const id of conversationIds) {
      await this.client.workflow
        .getHandle(conversationWorkflowId(id))
        .signal(closeSignal)
        .catch(() => undefined); // no actor yet (never sent to) or already finished
    }
  }

  /** Cancels a background task of the conversation; false when the actor does not know it (or is gone). */
  async cancelTask(conversationId: string, taskKey: string): Promise<boolean> {
    return this.client.workflow
      .getHandle(conversationWorkflowId(conversationId))
      .executeUpdate(cancelTaskUpdate, { args: [taskKey] })
      .catch(() => false);
  }
}
