import { randomBytes } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { Client, Connection, WorkflowUpdateFailedError, WorkflowUpdateStage } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import { ChatTranscript } from '../../domain/chat/transcript';
import type { TurnReply } from '../../domain/chat/turn';
import { ApiError, asApiError } from '../../api/http-errors';
import { newId } from '../../lib/ids';
import { apiErrorOf, ConversationWorkflows } from '../../app/temporal-clients/conversations';
import { ensureSearchAttributes } from '../../worker/namespace-attributes';
import {
  cancelTaskUpdate,
  conversationWorkflow,
  conversationWorkflowId,
  TASK_IN_PROGRESS,
  tasksQuery,
  visitorMessageUpdate,
  type VisitorMessage,
} from '../../workflows/conversation';
import { createWorkspace } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { installQuietRuntime } from '../support/temporal';
import { eventually } from '../support/worker-process';

/**
 * The conversation actor on the run's Temporal server (TestWorkflowEnvironment over the
 * existing dev server) with fake activities: turns, task rows and the upload indexing
 * are recorded in memory, so each test controls when a turn or a task ends.
 */
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let db: TestDatabase;
let ws: string;
const taskQueue = `conv-${randomBytes(6).toString('hex')}`;

/** What the fake activities saw, and the gates a test holds them on. */
const turns: Array<{ conversationId: string; messageId: string; replyId: string }> = [];
const tasksStarted: string[] = [];
const tasksFinished: Array<{ taskKey: string; status: string }> = [];
let turnGate: Promise<void> | null = null;

const fakes: Partial<Activities> = {
  async runAgentTurn(input): Promise<TurnReply> {
    turns.push(input);
    if (turnGate) await turnGate;
    return { reply_id: input.replyId, text: `reply to ${input.messageId}`, attachments: [], extras: {}, handoff: false };
  },
  async publishTurnError() {},
  async recordTaskStarted(input) {
    tasksStarted.push(input.taskKey);
  },
  async recordTaskFinished(input) {
    tasksFinished.push({ taskKey: input.taskKey, status: input.status });
  },
  /** Runs until cancelled, heartbeating so the cancellation reaches it. */
  async indexUploadForSearch(): Promise<number> {
    const ctx = Context.current();
    for (;;) {
      ctx.heartbeat();
      await Promise.race([ctx.sleep(100), ctx.cancelled]);
    }
  },
};

beforeAll(async () => {
  installQuietRuntime();
  env = await TestWorkflowEnvironment.createFromExistingServer({ address: process.env.TEST_TEMPORAL_ADDRESS });
  await ensureSearchAttributes(env.connection, 'default');
  worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! }, activities: fakes });
  running = worker.run();
  db = await createTestDatabase();
  ws = await createWorkspace(db.orm);
});
afterAll(async () => {
  worker.shutdown();
  await running;
  await env.teardown();
  await db.drop();
});

async function conversation(turnsPerRun?: number): Promise<string> {
  const id = newId('conv');
  await db.orm.em.fork().execute(`insert into conversations (id, workspace_id, channel, status) values (?, ?, 'web', 'open')`, [id, ws]);
  if (turnsPerRun) {
    await env.client.workflow.start(conversationWorkflow, { workflowId: conversationWorkflowId(id), taskQueue, args: [{ conversationId: id, workspaceId: ws, turnsPerRun }] });
  }
  return id;
}

const message = (clientMessageId: string, delivery: 'sync' | 'async', extra: Partial<VisitorMessage> = {}): VisitorMessage => ({
  clientMessageId,
  messageId: `msg_${clientMessageId}`,
  replyId: newId('msg'),
  delivery,
  ...extra,
});
const update = (conversationId: string, msg: VisitorMessage) => env.client.workflow.getHandle(conversationWorkflowId(conversationId)).executeUpdate(visitorMessageUpdate, { args: [msg] });
const runId = async (conversationId: string) => (await env.client.workflow.getHandle(conversationWorkflowId(conversationId)).describe()).runId;

test('recording fails, the client retries: the message stored before the failure gets one turn, and the actor still continues as new', async () => {
  const conv = await conversation(1);
  const firstRun = await runId(conv);
  const transcript = new ChatTranscript(db.orm.em);
  // The first attempt stores the message, then cannot reach Temporal: the update never arrives.
  const lost = await Connection.connect({ address: env.address });
  await lost.close();
  const unreachable = new ConversationWorkflows(new Client({ connection: lost }), taskQueue, transcript);
  const send = { clientMessageId: 'retry-me', text: 'where is my order?', uploadIds: [], indexUploads: [], delivery: 'sync' as const };
  await expect(unreachable.send({ id: conv, workspaceId: ws }, send)).rejects.toThrow();
  const [stored] = await db.orm.em.fork().execute<{ id: string }[]>(`select id from chat_messages where conversation_id = ? and client_message_id = 'retry-me'`, [conv]);
  expect(stored).toBeDefined();

  const workflows = new ConversationWorkflows(env.client, taskQueue, transcript);
  const before = turns.length;
  // The retry (sync) is answered, not left waiting on a turn that was never queued.
  const retried = await workflows.send({ id: conv, workspaceId: ws }, send);
  expect(retried).toMatchObject({ message_id: stored.id, duplicate: false, reply: { text: `reply to ${stored.id}` } });
  // A second retry (async) is the same message: its first ids, no second turn.
  const again = await workflows.send({ id: conv, workspaceId: ws }, { ...send, delivery: 'async' });
  expect(again).toEqual({ message_id: stored.id, reply_id: retried.reply_id, duplicate: true });
  expect(turns.slice(before).map((t) => t.messageId)).toEqual([stored.id]);
  // Nothing was left pending: after its one turn per run, the actor continued as new.
  await eventually(10_000, 'the actor to continue as new', async () => (await runId(conv)) !== firstRun);
});

test('continue-as-new with updates in flight: every waiting sync caller gets its reply, and the next run still knows their ids', async () => {
  const conv = await conversation(1);
  const firstRun = await runId(conv);
  let release!: () => void;
  turnGate = new Promise((r) => (release = r));
  const before = turns.length;
  try {
    const a = update(conv, message('a', 'sync'));
    await eventually(10_000, 'the first turn to start', async () => turns.length === before + 1);
    // Queued (accepted before c is sent, so in this order) behind a turn that already fills this run's quota of one.
    const b = await env.client.workflow
      .getHandle(conversationWorkflowId(conv))
      .startUpdate(visitorMessageUpdate, { args: [message('b', 'sync')], waitForStage: WorkflowUpdateStage.ACCEPTED });
    const c = await update(conv, message('c', 'async'));
    expect(c).toMatchObject({ message_id: 'msg_c', duplicate: false });
    expect(await runId(conv)).toBe(firstRun);
    release();
    const [ra, rb] = await Promise.all([a, b.result()]);
    expect(ra.reply?.text).toBe('reply to msg_a');
    expect(rb.reply?.text).toBe('reply to msg_b');
    await eventually(10_000, 'the actor to continue as new', async () => (await runId(conv)) !== firstRun);
    expect(turns.slice(before).map((t) => t.messageId)).toEqual(['msg_a', 'msg_b', 'msg_c']);
    // The new run carried the ids: a repeat is a duplicate with the first reply id, and no turn.
    const repeat = await update(conv, { ...message('a', 'async'), replyId: newId('msg') });
    expect(repeat).toEqual({ message_id: 'msg_a', reply_id: ra.reply_id, duplicate: true });
    expect(turns.length).toBe(before + 3);
  } finally {
    turnGate = null;
    release();
  }
});

test('a blocking task: sends are refused as task_in_progress (label, task_key), the turn waits; cancelled, the task ends and the turn runs', async () => {
  const conv = await conversation();
  const workflows = new ConversationWorkflows(env.client, taskQueue, new ChatTranscript(db.orm.em));
  const before = turns.length;
  const first = workflows.send({ id: conv, workspaceId: ws }, { clientMessageId: 'with-file', text: 'read this', uploadIds: [], indexUploads: [{ uploadId: 'upl_1', fileName: 'lease.txt' }], delivery: 'sync' });
  await eventually(10_000, 'the task to start', async () => tasksStarted.includes('index:upl_1'));
  const handle = env.client.workflow.getHandle(conversationWorkflowId(conv));
  expect((await handle.query(tasksQuery)).map((t) => [t.task_key, t.status, t.blocking])).toEqual([['index:upl_1', 'running', true]]);

  // The validator refuses, with a typed failure the workflow client maps; the refused message is taken back.
  const refused = await update(conv, message('meanwhile', 'sync')).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
  const cause = (refused as WorkflowUpdateFailedError).cause as ApplicationFailure;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  expect(cause.type).toBe(TASK_IN_PROGRESS);
  expect(cause.details).toEqual([{ label: 'Reading lease.txt', task_key: 'index:upl_1' }]);
  const viaApi = await workflows.send({ id: conv, workspaceId: ws }, { clientMessageId: 'hello', text: 'hello?', uploadIds: [], indexUploads: [], delivery: 'sync' }).catch((err: unknown) => asApiError(err));
  expect(viaApi).toBeInstanceOf(ApiError);
  expect((viaApi as ApiError).body()).toEqual({ error: 'task_in_progress', message: 'Please wait: Reading lease.txt', label: 'Reading lease.txt', task_key: 'index:upl_1' });
  expect(asApiError(apiErrorOf(refused))).toMatchObject({ status: 409, code: 'task_in_progress' });
  const texts = await db.orm.em.fork().execute<{ text: string }[]>(`select text from chat_messages where conversation_id = ? order by created_at`, [conv]);
  expect(texts.map((r) => r.text)).toEqual(['read this']);
  expect(turns.length).toBe(before);

  expect(await handle.executeUpdate(cancelTaskUpdate, { args: ['index:upl_1'] })).toBe(true);
  const answered = await first;
  expect(answered.reply?.text).toBe(`reply to ${answered.message_id}`);
  expect(turns.length).toBe(before + 1);
  await eventually(10_000, 'the task row to be finished', async () => tasksFinished.some((t) => t.taskKey === 'index:upl_1'));
  expect(tasksFinished.filter((t) => t.taskKey === 'index:upl_1')).toEqual([{ taskKey: 'index:upl_1', status: 'cancelled' }]);
  expect(await handle.executeUpdate(cancelTaskUpdate, { args: ['index:upl_1'] })).toBe(false);
  // No task runs any more: the next send is taken.
  expect(await update(conv, message('after', 'async'))).toMatchObject({ duplicate: false });
});
