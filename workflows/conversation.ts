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
  ParentClosePolicy,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  WorkflowIdReusePolicy,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Activities } from '../activities';
import type { TaskStatus } from '../domain/chat/tasks';
import type { OperatorAction, OperatorActionResult } from '../domain/inbox/actions';
import type { TurnReply } from '../domain/chat/turn';
import { cancelled, recordCancelled } from './cancellation';
import { messageSendSummary, messageSendWorkflow, messageSendWorkflowId } from './message-send';
import { localPresets, presets } from './presets';
import { shortSteps } from './short-steps';
import { WORKSPACE_ID } from './search-attributes';

/** Short database writes (a frame, a task's row): local activities (see short-steps.ts). */
const { publishTurnError, recordTaskStarted, recordTaskFinished } = shortSteps(['publishTurnError', 'recordTaskStarted', 'recordTaskFinished'], presets.dbWrite, localPresets.dbWrite);
const { runAgentTurn } = proxyActivities<Activities>(presets.agentTurn);
const { indexUploadForSearch } = proxyActivities<Activities>(presets.uploadIndexing);
/** A messaging channel's reply as a send: one short read (local), no pre-patch history has it. */
const { planReplySend } = proxyLocalActivities<Activities>(localPresets.dbWrite);
const { sendAgentReply } = proxyActivities<Activities>(presets.replySend);
/** A person's action from the inbox: written and published by one activity (a msgapp reply waits for its send). */
const { applyOperatorAction } = proxyActivities<Activities>(presets.replySend);

/**
 * The patch that sends a messaging channel's reply from an activity that starts its
 * message-send workflow eagerly (the first task in the start call's answer), instead of
 * as a child workflow (whose start waits on the server's queues). Runs recorded before
 * it keep the child when replayed.
 */
export const REPLY_SEND_ACTIVITY_PATCH = 'reply-send-activity';
/** A repeat of a message whose turn failed runs the turn again (histories before it returned the first ids). */
export const RETRY_FAILED_TURN_PATCH = 'retry-failed-turn';

/** The actor's workflow id: one per conversation, on every channel. */
export const conversationWorkflowId = (conversationId: string) => `conversation:${conversationId}`;
/** A background task's child workflow: from the conversation id, so a replayed history keeps its recorded child ids. */
export const conversationTaskWorkflowId = (conversationId: string, taskKey: string) => `conversation:${conversationId}:task:${taskKey}`;

/** Failure type of the visitor-message validator once the conversation is closed. */
export const CONVERSATION_CLOSED = 'conversation_closed';
/** Failure type of the visitor-message validator while a blocking task runs; details: [TaskInProgress]. */
export const TASK_IN_PROGRESS = 'task_in_progress';

export interface TaskInProgress {
  label: string;
  task_key: string;
}

/**
 * A visitor message the API has already stored (insert-if-absent by the client's message
 * id): the actor only decides whether it takes a turn, never writes it.
 */
export interface VisitorMessage {
  /** The client's id for the message: a repeated send with it is the same message. */
  clientMessageId: string;
  /** The stored message's id. */
  messageId: string;
  /** The id proposed for its reply; a duplicate gets the first one back. */
  replyId: string;
  /** Uploads long enough to be indexed for search first: each becomes a blocking task. */
  indexUploads?: Array<{ uploadId: string; fileName: string }>;
  /** `sync`: the update completes with the reply; `async`: once the turn is queued. */
  delivery: 'sync' | 'async';
}

export interface VisitorMessageResult {
  message_id: string;
  reply_id: string;
  /** The actor had this client message id already: no new turn. */
  duplicate: boolean;
  /** Sync delivery: the reply, or why there is none. */
  reply?: TurnReply;
  error?: string;
}

export interface TaskState {
  task_key: string;
  label: string;
  kind: string;
  status: TaskStatus;
  blocking: boolean;
  started_at: string;
}

interface TurnIds {
  message_id: string;
  reply_id: string;
}

/** What a run hands to the next one when it continues as new. */
export interface ConversationCarry {
  /** Recent client message ids and the ids they were given (bounded). */
  seen: Array<[string, TurnIds]>;
  turns: number;
}

export interface ConversationInput {
  conversationId: string;
  workspaceId: string;
  /** How replies leave: `web` (default) through the widget's sockets, `msgapp` as messages (a message-send child per reply). */
  channel?: 'web' | 'msgapp';
  /** Turns per run before continuing as new (tests lower it). */
  turnsPerRun?: number;
  carry?: ConversationCarry;
}

export const visitorMessageUpdate = defineUpdate<VisitorMessageResult, [VisitorMessage]>('visitorMessage');
export const cancelTaskUpdate = defineUpdate<boolean, [string]>('cancelTask');
export const closeSignal = defineSignal('close');
/** A customer's message on a messaging channel (msgapp), stored by its inbound workflow: queued without waiting (see Conversation.customerMessage). */
export const customerMessageSignal = defineSignal<[Omit<VisitorMessage, 'delivery' | 'indexUploads'>]>('customerMessage');
export const tasksQuery = defineQuery<TaskState[]>('tasks');
/**
 * A person's action from the console's inbox (take, assign, reply, note, hand back, close): the argument names who
 * acts (user id and email), so this history shows who did what. Refused while closed (conversation_closed).
 */
export const operatorActionUpdate = defineUpdate<OperatorActionResult, [OperatorAction]>('operatorAction');

/** Client message ids remembered (and carried across runs); older ones are the transcript's unique index's to catch. */
const SEEN_LIMIT = 500;
/** Outcomes kept for sync duplicates; an older one is read back from the transcript by the API. */
const FINISHED_LIMIT = 50;
const DEFAULT_TURNS_PER_RUN = 200;

/** Task children to the parent: `uploadIndexTaskWorkflow` reads one long upload into its search passages. */
export async function uploadIndexTaskWorkflow(uploadId: string): Promise<number> {
  setCurrentDetails(`Chunking and embedding upload ${uploadId} for search in its conversation.`);
  const passages = await indexUploadForSearch.executeWithOptions({ ...presets.uploadIndexing, summary: 'chunk and embed the upload' }, [uploadId]);
  setCurrentDetails(`Indexed: ${passages} passages.`);
  return passages;
}

type Outcome = Pick<VisitorMessageResult, 'reply' | 'error'>;
/** `recorded`: its end is written (the row and the frame), so a cancelled actor may finish. */
type Task = TaskState & { scope: CancellationScope; recorded: boolean };

/**
 * The state of one conversation's actor and all its handlers do to it. Handlers run
 * only between the main loop's awaits, so no lock is needed; every change they make
 * happens before their first await, so an accepted update is in `seen` at once.
 */
class Conversation {
  private readonly seen: Map<string, TurnIds>;
  private readonly queue: TurnIds[] = [];
  /** Reply ids of turns queued or running. */
  private readonly pending = new Set<string>();
  private readonly finished = new Map<string, Outcome>();
  private readonly tasks = new Map<string, Task>();
  private closed = false;
  private turns = 0;
  private lastError: string | null = null;

  constructor(private readonly input: ConversationInput) {
    this.seen = new Map(input.carry?.seen ?? []);
  }

  /** The update's validator: a refusal here leaves no trace in the actor (and the API takes the stored message back). */
  validateMessage(msg: VisitorMessage): void {
    if (this.closed) throw ApplicationFailure.create({ type: CONVERSATION_CLOSED, message: 'the conversation is closed', nonRetryable: true });
    const blocking = [...this.tasks.values()].find((t) => t.blocking && t.status === 'running');
    if (blocking) {
      const details: TaskInProgress = { label: blocking.label, task_key: blocking.task_key };
      throw ApplicationFailure.create({ type: TASK_IN_PROGRESS, message: `Please wait: ${blocking.label}`, details: [details], nonRetryable: true });
    }
    if (!msg.clientMessageId || !msg.messageId || !msg.replyId) throw ApplicationFailure.create({ type: 'invalid_message', message: 'message ids are required', nonRetryable: true });
  }

  /**
   * A stored visitor message: one turn per client message id; a sync caller waits for its outcome. A repeat of a
   * message whose turn failed (the widget's Retry sends the same client message id) runs the turn again on the
   * stored message, under the new reply id the repeat proposes: the question is stored once and answered once.
   */
  async receive(msg: VisitorMessage): Promise<VisitorMessageResult> {
    const prior = this.seen.get(msg.clientMessageId);
    const failed = prior !== undefined && this.finished.get(prior.reply_id)?.error !== undefined;
    if (prior && !(failed && patched(RETRY_FAILED_TURN_PATCH))) return { ...prior, duplicate: true, ...(msg.delivery === 'sync' ? await this.outcomeOf(prior.reply_id) : {}) };
    const ids = { message_id: prior?.message_id ?? msg.messageId, reply_id: msg.replyId };
    this.remember(msg.clientMessageId, ids);
    // A retried turn's uploads were read for its first one.
    if (!prior) for (const u of msg.indexUploads ?? []) this.startTask(`index:${u.uploadId}`, 'index_upload', `Reading ${u.fileName}`, u.uploadId);
    this.queue.push(ids);
    this.pending.add(ids.reply_id);
    return { ...ids, duplicate: false, ...(msg.delivery === 'sync' ? await this.outcomeOf(ids.reply_id) : {}) };
  }

  /**
   * A customer's message from a messaging channel, as a signal: nobody waits on it (its
   * inbound workflow must never wait for this actor's workflow task, which the same
   * worker may be unable to run, e.g. while shutting down). Deduplicated like an update;
   * one that arrives after the conversation closed is not answered (said in the details).
   */
  customerMessage(msg: Omit<VisitorMessage, 'delivery' | 'indexUploads'>): void {
    if (!msg.clientMessageId || !msg.messageId || !msg.replyId) return;
    if (this.closed) {
      this.lastError = `message ${msg.messageId} arrived after the conversation closed: not answered`;
      return;
    }
    void this.receive({ ...msg, delivery: 'async' });
  }

  /** Nothing waits for a closed conversation's tasks; queued turns still get their answer. */
  close(): void {
    this.closed = true;
    for (const t of this.tasks.values()) if (t.status === 'running') t.scope.cancel();
  }

  /** The validator of a person's action: nothing is done to a closed conversation. */
  validateOperatorAction(action: OperatorAction): void {
    if (this.closed) throw ApplicationFailure.create({ type: CONVERSATION_CLOSED, message: 'the conversation is closed', nonRetryable: true });
    if (!action?.actor?.id) throw ApplicationFailure.create({ type: 'invalid_message', message: 'the acting person is required', nonRetryable: true });
  }

  /** A person's action, written and published by its activity; a close also ends the actor once idle. */
  async operatorAction(action: OperatorAction): Promise<OperatorActionResult> {
    const { conversationId, workspaceId } = this.input;
    const result = await applyOperatorAction.executeWithOptions({ ...presets.replySend, summary: `${action.kind} by ${action.actor.email}` }, [{ conversationId, workspaceId, action }]);
    if (result.ok && action.kind === 'close') this.close();
    return result;
  }

  async cancelTask(key: string): Promise<boolean> {
    const task = this.tasks.get(key);
    if (!task || task.status !== 'running') return false;
    task.scope.cancel();
    await condition(() => task.status !== 'running');
    return (task.status as TaskStatus) === 'cancelled';
  }

  taskList(): TaskState[] {
    return [...this.tasks.values()].map(({ task_key, label, kind, status, blocking, started_at }) => ({ task_key, label, kind, status, blocking, started_at }));
  }

  /** A turn is queued and no blocking task holds it. */
  turnReady(): boolean {
    return this.queue.length > 0 && ![...this.tasks.values()].some((t) => t.blocking && t.status === 'running');
  }

  idle(): boolean {
    return this.queue.length === 0 && [...this.tasks.values()].every((t) => t.status !== 'running');
  }

  /** Idle and done with this run: closed, or enough turns (or history) for one run. */
  runOver(): boolean {
    return this.idle() && (this.closed || this.turns >= (this.input.turnsPerRun ?? DEFAULT_TURNS_PER_RUN) || workflowInfo().continueAsNewSuggested);
  }

  isClosed(): boolean {
    return this.closed;
  }

  carry(): ConversationCarry {
    return { seen: [...this.seen], turns: (this.input.carry?.turns ?? 0) + this.turns };
  }

  /** The next queued turn, as one activity; a failed turn is told to the sockets and to a sync caller. */
  async takeTurn(): Promise<void> {
    const turn = this.queue.shift()!;
    const { conversationId, workspaceId } = this.input;
    this.explain(`Answering message ${turn.message_id} (reply ${turn.reply_id}).`);
    try {
      const reply = await runAgentTurn.executeWithOptions({ ...presets.agentTurn, summary: `turn: answer ${turn.message_id}` }, [
        { conversationId, workspaceId, messageId: turn.message_id, replyId: turn.reply_id },
      ]);
      if (this.input.channel === 'msgapp' && !reply.held && reply.text) await this.sendReply(turn.reply_id);
      this.finish(turn.reply_id, { reply });
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : err;
      const reason = cause instanceof ApplicationFailure ? cause.message : 'the agent could not answer';
      this.lastError = `turn for ${turn.message_id} failed: ${(cause as Error).message}`;
      await publishTurnError('tell the sockets: turn failed', [
        { conversationId, replyId: turn.reply_id, code: 'workflow_execution_failed', text: 'The agent could not answer this message. Please try again.' },
      ]);
      this.finish(turn.reply_id, { error: reason });
    }
    this.turns++;
    this.explain();
  }

  /**
   * A messaging channel's reply leaves through the message-send workflow, as a child
   * named by the reply's id (`message-send:<reply id>`, never reused: a reply is sent
   * once, even by a later run of this actor). The actor waits for it, so replies go out
   * in order; it is abandoned, not cancelled, if the actor ends first.
   */
  private async sendReply(replyId: string): Promise<void> {
    const { conversationId, workspaceId } = this.input;
    if (patched(REPLY_SEND_ACTIVITY_PATCH)) {
      this.explain(`Sending reply ${replyId} (message-send:${replyId}).`);
      try {
        const sent = await sendAgentReply.executeWithOptions({ ...presets.replySend, summary: `send reply ${replyId}` }, [{ conversationId, replyId }]);
        if ('skipped' in sent) this.lastError = `reply ${replyId} not sent: ${sent.skipped}`;
        else if (sent.status === 'failed') this.lastError = `reply ${replyId} failed at the provider: ${sent.error}`;
      } catch (err) {
        if (cancelled(err)) throw err;
        const cause = err instanceof ActivityFailure ? err.cause : err;
        this.lastError = `reply ${replyId} could not be sent: ${(cause as Error).message}`;
      }
      return;
    }
    const plan = await planReplySend.executeWithOptions({ ...localPresets.dbWrite, summary: 'plan the reply as a message' }, [{ conversationId, replyId }]);
    if ('skipped' in plan) {
      this.lastError = `reply ${replyId} not sent: ${plan.skipped}`;
      return;
    }
    this.explain(`Sending reply ${replyId} (message-send:${plan.messageId}).`);
    try {
      const child = await startChild(messageSendWorkflow, {
        workflowId: messageSendWorkflowId(plan.messageId),
        args: [plan],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        typedSearchAttributes: [{ key: WORKSPACE_ID, value: workspaceId }],
        staticSummary: messageSendSummary(plan),
      });
      const sent = await child.result();
      if (sent.status === 'failed') this.lastError = `reply ${replyId} failed at the provider: ${sent.error}`;
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) return; // sent by an earlier run of this actor
      if (cancelled(err)) throw err;
      this.lastError = `reply ${replyId} could not be sent: ${(err as Error).message}`;
    }
  }

  /** The current details an operator reads in the UI: what the actor is doing, its tasks, the last failed turn. */
  explain(doing?: string): void {
    const running = [...this.tasks.values()].filter((t) => t.status === 'running').map((t) => `${t.label} (${t.task_key})`);
    setCurrentDetails(
      [
        doing ?? (this.closed ? 'Closed: finishing queued turns.' : `Idle: waiting for ${this.input.channel === 'msgapp' ? 'customer' : 'visitor'} messages.`),
        `Turns this run: ${this.turns}; queued: ${this.queue.length}.`,
        running.length ? `Blocking tasks running: ${running.join(', ')}.` : null,
        this.lastError ? `Last error: ${this.lastError}` : null,
      ]
        .filter(Boolean)
        .join('\n\n'),
    );
  }

  private finish(replyId: string, outcome: Outcome): void {
    this.finished.set(replyId, outcome);
    this.pending.delete(replyId);
    if (this.finished.size > FINISHED_LIMIT) this.finished.delete(this.finished.keys().next().value as string);
  }

  private async outcomeOf(replyId: string): Promise<Outcome> {
    if (this.pending.has(replyId)) await condition(() => !this.pending.has(replyId));
    return this.finished.get(replyId) ?? {};
  }

  private remember(clientId: string, ids: TurnIds): void {
    this.seen.set(clientId, ids);
    if (this.seen.size > SEEN_LIMIT) this.seen.delete(this.seen.keys().next().value as string);
  }

  /** A blocking background task as a child workflow the visitor can list and cancel; its row and frames through activities. */
  private startTask(key: string, kind: string, label: string, uploadId: string): void {
    if (this.tasks.get(key)?.status === 'running') return;
    const task: Task = { task_key: key, kind, label, blocking: true, status: 'running', started_at: new Date().toISOString(), scope: new CancellationScope(), recorded: false };
    this.tasks.set(key, task);
    void this.runTask(task, uploadId);
  }

  private async runTask(task: Task, uploadId: string): Promise<void> {
    const { conversationId, workspaceId } = this.input;
    const workflowId = conversationTaskWorkflowId(conversationId, task.task_key);
    let error: string | null = null;
    try {
      await recordTaskStarted(`task started: ${task.task_key}`, [
        { conversationId, workspaceId, taskKey: task.task_key, kind: task.kind, label: task.label, blocking: task.blocking, workflowId },
      ]);
      await task.scope.run(async () => {
        const child = await startChild(uploadIndexTaskWorkflow, {
          workflowId,
          args: [uploadId],
          // Children do not inherit search attributes: an operator listing a workspace finds its tasks too.
          typedSearchAttributes: [{ key: WORKSPACE_ID, value: workspaceId }],
          staticSummary: task.label,
          staticDetails: `Background task ${task.task_key} (${task.kind}, blocking: ${task.blocking}) of conversation ${conversationId}.`,
        });
        this.explain();
        await child.result();
      });
      task.status = 'completed';
    } catch (err) {
      const cancelled = isCancellation(err) || (err instanceof ChildWorkflowFailure && isCancellation(err.cause));
      task.status = cancelled ? 'cancelled' : 'failed';
      if (!cancelled) {
        const cause = err instanceof ChildWorkflowFailure && err.cause ? err.cause : err;
        error = 'the task failed';
        this.lastError = `task ${task.task_key} failed: ${(cause as Error).message}`;
      }
    }
    // Recorded even when the whole actor is being cancelled: the widget must not list the task as running for ever.
    await recordCancelled(() =>
      recordTaskFinished(`task ${task.status}: ${task.task_key}`, [
        { conversationId, taskKey: task.task_key, label: task.label, status: task.status, error },
      ]),
    );
    task.recorded = true;
    this.explain();
  }

  /** Every task's end is recorded: a cancelled actor waits for this before it ends. */
  tasksRecorded(): boolean {
    return [...this.tasks.values()].every((t) => t.recorded);
  }
}

/**
 * The actor of one conversation (`conversation:conv_…`), long-lived, on every channel:
 * web chat's replies reach the widget's sockets, msgapp's leave as messages (one
 * message-send child each). Visitor messages arrive as updates once the API (web) or
 * the inbound workflow (msgapp) has stored them, deduplicated by the client's
 * message id (here for the recent ones; the API answers older ones from the transcript).
 * Turns run one at a time in arrival order, each as an activity. Background tasks are
 * child workflows the visitor can list and cancel; while a blocking one runs, the
 * validator refuses new messages (409 task_in_progress) and queued turns wait. After
 * `turnsPerRun` turns, or when the server suggests it, the run continues as new once
 * idle and every update in flight has finished, carrying the dedupe window.
 */
export async function conversationWorkflow(input: ConversationInput): Promise<void> {
  const conversation = new Conversation(input);
  setHandler(tasksQuery, () => conversation.taskList(), { description: "The conversation's background tasks (running and finished this run), as GET /tasks lists them." });
  setHandler(closeSignal, () => conversation.close(), {
    description: 'The conversation was closed (POST /conversations/new): running tasks are cancelled, queued turns still answered, then the actor ends.',
  });
  setHandler(visitorMessageUpdate, (msg) => conversation.receive(msg), {
    validator: (msg) => conversation.validateMessage(msg),
    description:
      'A visitor message the API stored (POST /send): queues one turn per client message id; sync delivery completes with the reply. Refused while closed or while a blocking task runs.',
  });
  setHandler(customerMessageSignal, (msg) => conversation.customerMessage(msg), {
    description: "A customer's message on a messaging channel (msgapp), stored by its inbound workflow: queues one turn per provider message id; the reply leaves as a message.",
  });
  setHandler(cancelTaskUpdate, (key) => conversation.cancelTask(key), {
    description: 'Cancels a running background task by its task_key (POST /tasks/cancel); true when it was cancelled.',
  });
  setHandler(operatorActionUpdate, (action) => conversation.operatorAction(action), {
    validator: (action) => conversation.validateOperatorAction(action),
    description: "A person's action from the console's inbox (take over, assign, reply, internal note, hand back, close), with who acts: one activity writes and publishes it.",
  });
  conversation.explain();

  try {
    for (;;) {
      await condition(() => conversation.turnReady() || conversation.runOver());
      if (conversation.turnReady()) {
        await conversation.takeTurn();
        continue;
      }
      // Idle: finish the updates in flight first; one may have queued a turn meanwhile.
      await condition(() => allHandlersFinished() || !conversation.idle());
      if (!conversation.idle()) continue;
      if (conversation.isClosed()) return;
      await continueAsNew<typeof conversationWorkflow>({ ...input, carry: conversation.carry() });
    }
  } catch (err) {
    if (!cancelled(err)) throw err;
    // Cancelled: the running tasks were cancelled with the actor; their ends are written before the run ends
    // (a run that ended first would drop those writes), so the widget never lists them as running.
    await recordCancelled(() => condition(() => conversation.tasksRecorded()));
    conversation.explain('Cancelled by an operator: running tasks recorded as cancelled. The next visitor message starts a new run.');
    throw err;
  }
}
