import { Context } from '@temporalio/activity';
import { ChatFrames } from '../domain/chat/frames';
import type { TaskStatus } from '../domain/chat/tasks';
import type { SendPlan } from '../domain/messaging/plan';
import type { ActivityDeps } from './deps';
import { OperationalError } from '../lib/failures';
import { withHeartbeat } from './errors';

/** The conversation actor's steps: agent turns, its background tasks, what the sockets are told. */
export function conversationActivities(deps: ActivityDeps) {
  const frames = new ChatFrames(deps.em);
  return {
    /**
     * One agent turn: retrieval, the model (streamed to the sockets), tools, the stored
     * reply. An LlmError says itself whether a retry may help and how long to wait.
     */
    async runAgentTurn(input: { conversationId: string; workspaceId: string; messageId: string; replyId: string }) {
      return withHeartbeat(() => deps.services.turns.run({ ...input, attempt: Context.current().info.attempt }, () => Context.current().heartbeat()));
    },

    /** An agent's reply on a messaging channel as a send (message-send:<reply id>), or why it is not sent. */
    async planReplySend(input: { conversationId: string; replyId: string }): Promise<SendPlan | { skipped: string }> {
      return deps.services.messages.planReply(input.conversationId, input.replyId);
    },

    /**
     * An agent's reply on a messaging channel, sent: planned under the send rules, then its
     * `message-send:<reply id>` workflow started (eagerly: its first task runs here, in the
     * start call's answer) and waited for. Started once ever (REJECT_DUPLICATE): a retry of
     * this step waits for the run that exists. Heartbeats while it waits.
     */
    async sendAgentReply(input: { conversationId: string; replyId: string }): Promise<{ skipped: string } | { status: 'sent' | 'failed'; error?: string }> {
      return withHeartbeat(async () => {
        const plan = await deps.services.messages.planReply(input.conversationId, input.replyId);
        if ('skipped' in plan) return plan;
        if (!deps.sender) throw new OperationalError('NoWorkflowClient', 'this worker has no Temporal client to start the send', true);
        const sent = await deps.sender.send(plan, { once: true });
        return sent.status === 'sent' ? { status: 'sent' as const } : { status: 'failed' as const, error: sent.error };
      });
    },

    /** Tells the conversation's sockets that a turn failed. */
    async publishTurnError(input: { conversationId: string; replyId: string; code: 'workflow_provisioning' | 'workflow_execution_failed'; text: string }) {
      await frames.publish(input.conversationId, { type: 'error', reply_id: input.replyId, code: input.code, text: input.text });
    },

    /** A background task began: its row (what the widget lists) and a `task_status` frame. */
    async recordTaskStarted(input: { conversationId: string; workspaceId: string; taskKey: string; kind: string; label: string; blocking: boolean; workflowId: string }) {
      await deps.services.tasks.started(input);
      await frames.publish(input.conversationId, { type: 'task_status', task_key: input.taskKey, label: input.label, status: 'running' });
    },

    async recordTaskFinished(input: { conversationId: string; taskKey: string; label: string; status: TaskStatus; error: string | null }) {
      await deps.services.tasks.finished(input);
      await frames.publish(input.conversationId, { type: 'task_status', task_key: input.taskKey, label: input.label, status: input.status });
    },

    /** A long upload's passages, for search in its conversation. */
    async indexUploadForSearch(uploadId: string): Promise<number> {
      return withHeartbeat(() => deps.services.uploadSearch.indexForSearch(uploadId));
    },
  };
}
