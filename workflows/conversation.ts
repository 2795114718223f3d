import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { TurnReply } from '../core/chat/turn';

const { recordVisitorMessage, publishTurnError, recordTaskStarted, recordTaskFinished } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds', maximumAttempts: 10 },
});
/**
 * The agent's turn: model calls stream for a while, so a lost worker is noticed by the
 * missing heartbeat, not by the overall timeout. A retry finds a stored reply and only
 * re-announces it.
 */
const { runAgentTurn } = proxyActivities<Activities>({
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 4, nonRetryableErrorTypes: ['LlmRejected'] },
});
const { indexUploadForSearch } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 3 },
});


/** The actor's workflow id: one per conversation, on every channel. */
export const conversationWorkflowId = (conversationId: string) => `conversation:${conversationId}`;

/** The failure type the visitor-message update's validator throws once the conversation is closed. */
export const CONVERSATION_CLOSED = 'conversation_closed';

export interface VisitorMessage {
  /** The client's id for the message: a repeated send with it is the same message. */
  clientMessageId: string;
  /** Ids proposed by the API for this message and its reply; a duplicate gets the first ones back. */
  messageId: string;
  replyId: string;
  text: string;
  uploadIds: string[];
  /** Uploads long enough to be indexed for search first: each becomes a blocking task. */
  indexUploads?: Array<{ uploadId: string; fileName: string }>;
  /** `sync`: the update completes with the reply; `async`: once the message is stored. */
  delivery: 'sync' | 'async';
}

export interface VisitorMessageResult {
  message_id: string;
  reply_id: string;
  duplicate: boolean;
  /** Sync delivery: the reply, or why there is none. */
  reply?: TurnReply;
  error?: string;
}

export interface TaskState {
  task_key: string;
  label: string;
  kind: string;
  status: 'running' | 'completed' | 'cancelled' | 'failed';
  blocking: boolean;
  started_at: string;
}

/** What a run hands to the next one when it continues as new. */
export interface ConversationCarry {
  /** Recent client message ids and the ids they were given (bounded). */
  seen: Array<[string, { message_id: string; reply_id: string }]>;
  turns: number;
}

export interface ConversationInput {
  conversationId: string;
  workspaceId: string;
  /** Turns per run before continuing as new (tests lower it). */
  turnsPerRun?: number;
  carry?: ConversationCarry;
}

export const visitorMessageUpdate = defineUpdate<VisitorMessageResult, [VisitorMessage]>('visitorMessage');
export const cancelTaskUpdate = defineUpdate<boolean, [string]>('cancelTask');
export const closeSignal = defineSignal('close');
export const tasksQuery = defineQuery<TaskState[]>('tasks');

const SEEN_LIMIT = 500;
const DEFAULT_TURNS_PER_RUN = 200;

interface PendingTurn {
  message_id: string;
  reply_id: string;
}

/** Task children to the parent: `uploadIndexTaskWorkflow` reads one long upload into its search passages. */
export async function uploadIndexTaskWorkflow(uploadId: string): Promise<number> {
  return indexUploadForSearch(uploadId);
}

/**
 * The actor of one web conversation (`conversation:conv_…`), long-lived. Visitor
 * messages arrive as updates, deduplicated by the client's message id (in the workflow
 * for the recent ones, and by the transcript's unique index for older ones). Turns run
 * one at a time in arrival order, each as an activity. Background tasks are child
 * workflows the visitor can list and cancel; while a blocking one runs, turns wait
 * (and the API refuses new sends with 409). After `turnsPerRun` turns, or when the
 * server suggests it, the run continues as new carrying the dedupe window.
 */
export async function conversationWorkflow(input: ConversationInput): Promise<void> {
  const seen = new Map(input.carry?.seen ?? []);
  const queue: PendingTurn[] = [];
  /** Replies queued or being written. */
  const pending = new Set<string>();
  const finished = new Map<string, { reply?: TurnReply; error?: string }>();
  const tasks = new Map<string, TaskState & { scope?: CancellationScope }>();
  let closed = false;
  let turns = 0;
  const turnsPerRun = input.turnsPerRun ?? DEFAULT_TURNS_PER_RUN;

  const remember = (clientId: string, ids: { message_id: string; reply_id: string }) => {
    seen.set(clientId, ids);
    if (seen.size > SEEN_LIMIT) seen.delete(seen.keys().next().value as string);
  };
  const blockingRunning = () => [...tasks.values()].some((t) => t.blocking && t.status === 'running');

  const waitFor = async (replyId: string): Promise<Pick<VisitorMessageResult, 'reply' | 'error'>> => {
    await condition(() => finished.has(replyId));
    return finished.get(replyId)!;
  };

  setHandler(tasksQuery, () => [...tasks.values()].map(({ task_key, label, kind, status, blocking, started_at }) => ({ task_key, label, kind, status, blocking, started_at })));
  setHandler(closeSignal, () => {
    closed = true;
    // Nothing waits for a closed conversation's tasks; queued turns still get their answer.
    for (const t of tasks.values()) if (t.status === 'running') t.scope?.cancel();
  });

  setHandler(
    visitorMessageUpdate,
    async (msg): Promise<VisitorMessageResult> => {
      const prior = seen.get(msg.clientMessageId);
      if (prior) {
        // The same message again: one turn only. A sync caller still gets the reply.
        if (msg.delivery === 'async') return { ...prior, duplicate: true };
        const outcome = pending.has(prior.reply_id) ? await waitFor(prior.reply_id) : finished.get(prior.reply_id);
        return { ...prior, duplicate: true, ...(outcome ?? {}) };
      }
      remember(msg.clientMessageId, { message_id: msg.messageId, reply_id: msg.replyId });
      pending.add(msg.replyId);
      const stored = await recordVisitorMessage({
        conversationId: input.conversationId,
        workspaceId: input.workspaceId,
        messageId: msg.messageId,
        clientMessageId: msg.clientMessageId,
        text: msg.text,
        uploadIds: msg.uploadIds,
      });
      // Stored before (outside this run's window): the first ids stand, and an answer given then stands too.
      const ids = { message_id: stored.message_id, reply_id: stored.reply_id ?? msg.replyId };
      if (!stored.created) {
        remember(msg.clientMessageId, ids);
        if (stored.reply_id) {
          pending.delete(msg.replyId);
          return { ...ids, duplicate: true };
        }
      }
      for (const u of msg.indexUploads ?? []) startTask(`index:${u.uploadId}`, 'index_upload', `Reading ${u.fileName}`, true, u.uploadId);
      queue.push(ids);
      if (msg.delivery === 'async') return { ...ids, duplicate: !stored.created };
      return { ...ids, duplicate: !stored.created, ...(await waitFor(ids.reply_id)) };
    },
    {
      validator: (msg) => {
        if (closed) throw ApplicationFailure.create({ type: CONVERSATION_CLOSED, message: 'the conversation is closed', nonRetryable: true });
        if (!msg.clientMessageId || !msg.messageId || !msg.replyId) throw new Error('message ids are required');
      },
    },
  );

  setHandler(cancelTaskUpdate, async (key) => {
    const task = tasks.get(key);
    if (!task || task.status !== 'running') return false;
    task.scope?.cancel();
    await condition(() => task.status !== 'running');
    return (task.status as TaskState['status']) === 'cancelled';
  });

  function startTask(key: string, kind: string, label: string, blocking: boolean, uploadId: string): void {
    if (tasks.get(key)?.status === 'running') return;
    const task: TaskState & { scope?: CancellationScope } = { task_key: key, kind, label, blocking, status: 'running', started_at: new Date().toISOString() };
    tasks.set(key, task);
    const scope = new CancellationScope();
    task.scope = scope;
    void (async () => {
      // From the input, not workflowInfo(): a replayed history keeps its recorded child ids.
      const workflowId = `conversation:${input.conversationId}:task:${key}`;
      try {
        await recordTaskStarted({ conversationId: input.conversationId, workspaceId: input.workspaceId, taskKey: key, kind, label, blocking, workflowId });
        await scope.run(async () => {
          const child = await startChild(uploadIndexTaskWorkflow, { workflowId, args: [uploadId] });
          await child.result();
        });
        task.status = 'completed';
      } catch (err) {
        const cancelled = isCancellation(err) || (err instanceof ChildWorkflowFailure && isCancellation(err.cause));
        task.status = cancelled ? 'cancelled' : 'failed';
      }
      await recordTaskFinished({ conversationId: input.conversationId, taskKey: key, label, status: task.status, error: task.status === 'failed' ? 'the task failed' : null });
    })();
  }

  const idle = () => queue.length === 0 && [...tasks.values()].every((t) => t.status !== 'running');
  for (;;) {
    await condition(() => (queue.length > 0 && !blockingRunning()) || (closed && idle()) || (idle() && (turns >= turnsPerRun || workflowInfo().continueAsNewSuggested)));
    if (queue.length && !blockingRunning()) {
      const turn = queue.shift()!;
      try {
        const reply = await runAgentTurn({ conversationId: input.conversationId, workspaceId: input.workspaceId, messageId: turn.message_id, replyId: turn.reply_id });
        finished.set(turn.reply_id, { reply });
      } catch (err) {
        const cause = err instanceof ActivityFailure ? err.cause : err;
        const reason = cause instanceof ApplicationFailure ? cause.message : 'the agent could not answer';
        await publishTurnError({ conversationId: input.conversationId, replyId: turn.reply_id, code: 'workflow_execution_failed', text: 'The agent could not answer this message. Please try again.' });
        finished.set(turn.reply_id, { error: reason });
      }
      pending.delete(turn.reply_id);
      turns++;
      if (finished.size > 50) finished.delete(finished.keys().next().value as string);
      continue;
    }
    // Idle: finish the updates in flight first; one may have queued a turn meanwhile.
    await condition(() => allHandlersFinished() || !idle());
    if (!idle()) continue;
    if (closed) return;
    await continueAsNew<typeof conversationWorkflow>({ ...input, carry: { seen: [...seen], turns: (input.carry?.turns ?? 0) + turns } });
  }
}
