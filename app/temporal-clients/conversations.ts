import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { ChatTranscript } from '../../domain/chat/transcript';
import { DomainError } from '../../domain/errors';
import { derivedId, newId } from '../../lib/ids';
import { searchAttributesFor } from './search-attributes';
import {
  cancelTaskUpdate,
  closeSignal,
  customerMessageSignal,
  CONVERSATION_CLOSED,
  operatorActionUpdate,
  conversationWorkflow,
  conversationWorkflowId,
  TASK_IN_PROGRESS,
  visitorMessageUpdate,
  type ConversationInput,
  type TaskInProgress,
  type VisitorMessageResult,
} from '../../workflows/conversation';
import type { ConversationRuns } from '../../domain/ports/workflow-runs';
import type { OperatorAction, OperatorActionResult } from '../../domain/inbox/actions';

/** Workflow failure types and the API errors they become: matched on the failure's type, never its text. */
const API_ERRORS: Record<string, (failure: ApplicationFailure) => DomainError> = {
  [CONVERSATION_CLOSED]: () => new DomainError('conversation_closed', 'This conversation is closed; start a new one with conversations/new'),
  [TASK_IN_PROGRESS]: (failure) => {
    const { label, task_key } = failure.details?.[0] as TaskInProgress;
    return new DomainError('task_in_progress', `Please wait: ${label}`, { label, task_key });
  },
};

/** The ApplicationFailure a failed update carries, when its type is one the API answers for. */
function refusalOf(err: unknown): ApplicationFailure | null {
  const cause = err instanceof WorkflowUpdateFailedError ? err.cause : err;
  return cause instanceof ApplicationFailure && cause.type && API_ERRORS[cause.type] ? cause : null;
}

/** The API error a failed update stands for, when its failure type has one; else the error itself. */
export function apiErrorOf(err: unknown): unknown {
  const refusal = refusalOf(err);
  return refusal ? API_ERRORS[refusal.type!](refusal) : err;
}

/** The id of the agent's reply to a customer's message: the same on every try. */
export const agentReplyId = (messageId: string) => derivedId('msg', `${messageId}:reply`);

/** A visitor's message as the send route hands it over. */
export interface VisitorSend {
  clientMessageId: string;
  text: string;
  uploadIds: string[];
  /** Uploads long enough to be indexed for search first: each becomes a blocking task. */
  indexUploads: Array<{ uploadId: string; fileName: string }>;
  delivery: 'sync' | 'async';
  /** The reply's id when the sender chose it (a voice turn listens for its deltas before sending); else a new one. */
  replyId?: string;
}

/**
 * The conversation actor as the API sees it: every start, update and signal of the
 * `conversation:<id>` workflow goes through here, so routes never touch Temporal.
 */
export class ConversationWorkflows implements ConversationRuns {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    private readonly transcript: Pick<ChatTranscript, 'storeVisitorMessage' | 'withdraw'>,
  ) {}

  /**
   * The send path, in this order:
   * 1. the message is stored, insert-if-absent by the client's message id, so a retry
   *    finds the first attempt's row whatever happened after it;
   * 2. already answered (a retry after the reply was stored): the stored ids, no actor;
   * 3. else the actor (started if not running) hears of the stored message and queues a
   *    turn, or already has it (`duplicate`); a sync send waits for the reply. A failure
   *    before the update reaches the actor leaves nothing in it: the retry is taken as new;
   * 4. refused by the actor's validator (closed, a blocking task): the 409 says the
   *    message was not taken, so a row this call stored is taken back.
   */
  async send(conv: { id: string; workspaceId: string }, send: VisitorSend): Promise<VisitorMessageResult> {
    const stored = await this.transcript.storeVisitorMessage({
      id: newId('msg'),
      workspaceId: conv.workspaceId,
      conversationId: conv.id,
      clientMessageId: send.clientMessageId,
      text: send.text,
      uploadIds: send.uploadIds,
    });
    if (stored.reply_id) return { message_id: stored.message_id, reply_id: stored.reply_id, duplicate: true };
    try {
      return await this.client.workflow.executeUpdateWithStart(visitorMessageUpdate, {
        args: [{ clientMessageId: send.clientMessageId, messageId: stored.message_id, replyId: send.replyId ?? newId('msg'), indexUploads: send.indexUploads, delivery: send.delivery }],
        startWorkflowOperation: new WithStartWorkflowOperation(conversationWorkflow, { ...this.actorStart({ ...conv, channel: 'web' }), workflowIdConflictPolicy: 'USE_EXISTING' }),
      });
    } catch (err) {
      if (stored.created && refusalOf(err)) await this.transcript.withdraw(conv.id, stored.message_id);
      throw apiErrorOf(err);
    }
  }

  /**
   * A customer's message on a messaging channel (msgapp), stored with its transcript
   * line by the inbound workflow: signalled to the actor (started if not running), which
   * queues a turn for it once per provider message id. A signal, not an update: the
   * caller (an activity) never waits on the actor's workflow task. The reply's id is
   * derived from the message's, so a repeat, or a new actor run, names the same reply
   * (answered once, sent once); the reply leaves through the channel.
   */
  async customerMessage(conv: { id: string; workspaceId: string; channel: 'msgapp' }, m: { providerMessageId: string; messageId: string }): Promise<void> {
    await this.client.workflow.signalWithStart(conversationWorkflow, {
      ...this.actorStart(conv),
      signal: customerMessageSignal,
      signalArgs: [{ clientMessageId: m.providerMessageId, messageId: m.messageId, replyId: agentReplyId(m.messageId) }],
    });
  }

  /**
   * A person's action from the console's inbox (issue 31), as the actor's `operatorAction` update: the actor is started
   * when none runs (a conversation nobody wrote to since its last run ended); a voice conversation's actor runs as a
   * web one (it takes no turns: nothing is sent from it). Refused by a closing actor: 409 conversation_closed.
   */
  async operatorAction(conv: { id: string; workspaceId: string; channel: 'web' | 'msgapp' | 'voice' }, action: OperatorAction): Promise<OperatorActionResult> {
    try {
      return await this.client.workflow.executeUpdateWithStart(operatorActionUpdate, {
        args: [action],
        startWorkflowOperation: new WithStartWorkflowOperation(conversationWorkflow, {
          ...this.actorStart({ id: conv.id, workspaceId: conv.workspaceId, channel: conv.channel === 'msgapp' ? 'msgapp' : 'web' }),
          workflowIdConflictPolicy: 'USE_EXISTING',
        }),
      });
    } catch (err) {
      throw apiErrorOf(err);
    }
  }

  /** The actor's start, when a message finds none running: one per conversation, whatever the channel. */
  private actorStart(conv: { id: string; workspaceId: string; channel: 'web' | 'msgapp' }) {
    return {
      workflowId: conversationWorkflowId(conv.id),
      taskQueue: this.taskQueue,
      args: [{ conversationId: conv.id, workspaceId: conv.workspaceId, ...(conv.channel === 'web' ? {} : { channel: conv.channel }) }] as [ConversationInput],
      typedSearchAttributes: searchAttributesFor({ workspaceId: conv.workspaceId }),
      staticSummary: conv.channel === 'web' ? 'web chat conversation' : `${conv.channel} conversation`,
      staticDetails: `The actor of conversation ${conv.id} (${conv.channel}): one update per customer message, one agent turn each${
        conv.channel === 'web' ? '; background tasks are its child workflows (' + conv.id + ':task:…)' : ', each reply sent by a message-send child workflow (message-send:<reply id>)'
      }.`,
    };
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
