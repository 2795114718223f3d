import type { TurnStats } from '../domain/voice/agent';
import { VoiceMedia } from '../domain/voice/media';
import { callScreening } from '../domain/voice/phone-call';
import { ReplyDeltas } from '../domain/voice/reply-deltas';
import { newId } from '../lib/ids';
import type { ActivityDeps } from '../activities';
import { WorkflowNotFoundError, type Client, type Connection } from '@temporalio/client';
import type { ConversationWorkflows } from '../app/temporal-clients/conversations';
import type { Worker } from '@temporalio/worker';
import type { WorkflowState } from '../activities/deps';
import type { Composition } from '../app/compose';
import { connectWorker } from './connection';
import { OutboxDispatcher } from './outbox-dispatcher';
import { kbIndexing, msgappInbound, webhookDeliveries } from './outbox-sources';
import { ensureSchedules } from './schedules';
import { ensureSearchAttributes } from './namespace-attributes';
import { createWorker } from './worker';
import { temporalDataConverter } from '../lib/crypto/payload-codec';

/** A workflow id's latest run as the maintenance reconciliation needs it: running, closed, or unknown. */
export function workflowStateOf(client: Client): (workflowId: string) => Promise<WorkflowState> {
  return async (workflowId) => {
    try {
      const d = await client.workflow.getHandle(workflowId).describe();
      return d.status.name === 'RUNNING' ? 'running' : 'closed';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'missing';
      throw err;
    }
  };
}

export { installRuntime } from './connection';

export interface WorkerRuntimeOptions {
  /** A prebuilt workflow bundle (tests build one per run); absent: see workflowBundleFor. */
  workflowBundle?: { codePath: string };
  /** The outbox relay (webhook deliveries, indexing, inbound msgapp messages), default on; tests that relay themselves turn it off. */
  dispatcher?: boolean;
  /** Search attributes and maintenance schedules, default on. */
  setUp?: boolean;
  /** What each voice turn cost (VAD, STT, model, TTS), for the voice benchmark. */
  onVoiceTurn?: (stats: TurnStats) => void;
}

export interface WorkerRuntime {
  worker: Worker;
  running: Promise<void>;
  dispatcher: OutboxDispatcher | null;
}

/**
 * The worker's own parts on top of a composition (app/compose.ts): the Temporal worker
 * on the composition's task queue, schedules and search attributes, and the outbox relay
 * (subscribed on the composition's LISTEN connection). They stop with the composition's
 * `close()`: the relay first, then the worker (drained), then its connection. The worker
 * polls over the composition's native connection, the one its client uses (so eager
 * starts reach it); a composition given a client of its own (tests) gets a connection
 * of the worker's own.
 */
export async function startWorker(c: Composition, opts: WorkerRuntimeOptions = {}): Promise<WorkerRuntime> {
  if (!c.temporal || !c.workflows || !c.temporalAddress) throw new Error('the worker needs a composition connected to Temporal (temporalAddress)');
  if (!c.notifications) throw new Error('the worker needs a composition with notifications (role worker or both)');
  const { client, taskQueue, namespace } = c.temporal;
  if (opts.setUp !== false) {
    await ensureSearchAttributes(client.connection as Connection, namespace);
    await ensureSchedules(client, taskQueue);
  }
  let connection = c.temporal.native;
  if (!connection) {
    const own = await connectWorker(c.temporalAddress, c.config.LOG_LEVEL);
    c.onClose(() => own.close(), 'worker Temporal connection');
    connection = own;
  }
  // The composition's Temporal client wrappers: the same the API process uses.
  const { conversations, webhooks, messages } = c.workflows;
  const worker = await createWorker({ connection, namespace, taskQueue, dataConverter: temporalDataConverter(c.payloadCodec), deps: {
      em: c.em,
      services: c.services,
      indexing: c.indexing,
      workflowState: workflowStateOf(client),
      webhookRuns: webhooks,
      conversations,
      voice: voiceMediaOf(c, conversations, opts.onVoiceTurn),
      sender: messages,
    }, workflowBundle: opts.workflowBundle });
  const running = worker.run();
  c.onClose(async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running.catch(() => undefined);
  }, 'Temporal worker (drain)');
  const dispatcher = opts.dispatcher === false ? null : await startRelay(c);
  return { worker, running, dispatcher };
}

/**
 * The outbox relay on a composition's LISTEN connection: webhook deliveries' first attempts (a retry workflow for
 * those that fail), knowledge-base indexing starts and inbound msgapp messages' hand-offs. In the worker process, or
 * a process of its own (worker/relay-main.ts: `npm start` runs one beside its API and worker). It stops with the
 * composition's `close()`. Its starts are eager when its client shares a worker's native connection (the first
 * workflow task comes back with the start).
 */
export async function startRelay(c: Composition): Promise<OutboxDispatcher> {
  if (!c.temporal) throw new Error('the outbox relay needs a composition connected to Temporal (temporalAddress)');
  if (!c.notifications || !c.workflows) throw new Error('the outbox relay needs a composition with notifications (role worker, both or relay)');
  const { client, taskQueue } = c.temporal;
  const config = c.config;
  const eager = c.temporal.native !== null;
  const dispatcher = new OutboxDispatcher(
    c.notifications,
    [
      webhookDeliveries(
        c.services.deliveries,
        client,
        {
          taskQueue,
          backoffMs: config.CONCIERGE_WEBHOOK_BACKOFF_MS,
          timeoutMs: config.CONCIERGE_WEBHOOK_TIMEOUT_MS,
          inline: { overall: config.CONCIERGE_WEBHOOK_INLINE_CONCURRENCY, perSubscription: config.CONCIERGE_WEBHOOK_INLINE_PER_SUBSCRIPTION },
          eager,
        },
        c.log,
      ),
      kbIndexing(c.em, client, { taskQueue, eager }),
      msgappInbound(c.services.providerEvents, client, { taskQueue, eager, actor: c.workflows.conversations, log: c.log }),
    ],
    c.log,
  );
  await dispatcher.start();
  c.onClose(() => dispatcher.stop(), 'outbox relay');
  return dispatcher;
}

/** The worker's voice media runner (null when speech is missing either way: /voice/start answers 503 then). */
function voiceMediaOf(c: Composition, conversations: ConversationWorkflows, onTurn?: (stats: TurnStats) => void): ActivityDeps['voice'] {
  const { stt, tts, transport } = c.voice;
  if (!stt || !tts) return undefined;
  // The model's reply as it streams, heard on the chat channel the turn's activity publishes its deltas on (one LISTEN per worker).
  const deltas = new ReplyDeltas(c.notifications!, c.log);
  const media = new VoiceMedia({
    em: c.em,
    sessions: c.services.voice,
    transport,
    stt,
    tts,
    notifications: c.notifications,
    blobs: c.blobs,
    log: c.log,
    silenceMs: c.config.VOICE_SILENCE_MS,
    joinTimeoutMs: c.config.VOICE_JOIN_TIMEOUT_SECONDS * 1000,
    mediaTimeoutMs: c.config.VOICE_MEDIA_TIMEOUT_SECONDS * 1000,
    maxMinutes: c.config.VOICE_MAX_MINUTES,
    onTurn,
    turn: async (conv, text, clientMessageId, onDelta) => {
      // The reply's id chosen here, so its deltas are heard from the first one (listening before the message is sent).
      const replyId = newId('msg');
      const stream = onDelta ? await deltas.listen(replyId, onDelta) : null;
      try {
        const result = await conversations.send(conv, { clientMessageId, replyId, text, uploadIds: [], indexUploads: [], delivery: 'sync' });
        await c.services.transcript.markChannel([result.message_id, result.reply_id], 'voice');
        if (result.reply?.held) return '';
        const reply = result.reply ?? (await c.services.transcript.get(result.reply_id));
        const whole = reply?.text ?? '';
        return stream ? stream.finish(whole) : whole;
      } finally {
        stream?.stop();
      }
    },
  });
  // Outbound calls screen who answered (answering-machine detection) as the call's agent says (AgentSpec.phone).
  return { media, sessions: c.services.voice, telephony: c.voice.telephony, log: c.log, screening: callScreening(c.em, tts) };
}
