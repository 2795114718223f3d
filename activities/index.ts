import { ApplicationFailure, Context } from '@temporalio/activity';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { IndexingService } from '../core/kb/indexing';
import type { SendPlan } from '../core/messages/plan';
import { SendFailedError } from '../core/messages/messages';
import type { Services } from '../core/services';
import { publishFrame } from '../core/chat/frames';
import { LlmError } from '../core/llm/model';

export interface ActivityDeps {
  em: EntityManager;
  services: Pick<Services, 'idempotency' | 'deliveries' | 'blobs' | 'messages' | 'transcript' | 'turns' | 'uploads'>;
  indexing: IndexingService;
}

/** Extraction failures that say nothing about the document, so a retry may succeed. */
const TRANSIENT_EXTRACTION = new Set(['extraction process crashed', 'extraction could not start']);

/** Longest Retry-After a chat turn honours before its next attempt. */
const MAX_LLM_RETRY_AFTER_MS = 30_000;

/** Heartbeats every few seconds while `work` runs (extraction waits on a child process). */
async function withHeartbeat<T>(work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => Context.current().heartbeat(), 5_000);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

/** Every activity, closed over its dependencies: the worker wires real ones, tests their own. */
export function createActivities(deps: ActivityDeps) {
  return {
    /** Removes Idempotency-Key responses past their 24 h life. */
    async purgeExpiredIdempotencyKeys(): Promise<number> {
      return deps.services.idempotency.purgeExpired();
    },

    /** Removes rate-limit windows that ended over an hour ago (PostgreSQL store only). */
    async purgeExpiredRateLimits(): Promise<number> {
      const em = deps.em.fork();
      const [{ present }] = await em.execute<{ present: boolean }[]>(`select to_regclass('rate_limits') is not null as present`);
      if (!present) return 0;
      const rows = await em.execute<{ n: string }[]>(
        `with gone as (delete from rate_limits where expire is not null and expire < ? returning 1) select count(*) as n from gone`,
        [Date.now() - 3_600_000],
      );
      return Number(rows[0]?.n ?? 0);
    },

    /** One webhook delivery attempt: one signed POST of the stored body, logged. */
    async attemptWebhookDelivery(input: { deliveryId: string; run: number; attempt: number }) {
      return deps.services.deliveries.attempt(input.deliveryId, input.run, input.attempt);
    },

    async beginIndexing(fileId: string) {
      return deps.indexing.begin(fileId);
    },

    /** Extracts (in an isolated child process), chunks and stores the passages, replacing any earlier set. */
    async extractAndChunkFile(fileId: string): Promise<number> {
      try {
        return await withHeartbeat(() => deps.indexing.extractAndChunk(fileId));
      } catch (err) {
        const { reason, detail, retryable } = err as { reason?: unknown; detail?: unknown; retryable?: unknown };
        if (typeof reason !== 'string') throw err;
        // A process that died or never started, or a transcription server that was busy or
        // unreachable, says nothing about the document: try again. (ExtractionCrash is the
        // type the kb-index workflow retries and reports by its message.)
        if (TRANSIENT_EXTRACTION.has(reason) || retryable === true) {
          Context.current().log.warn('extraction failed for a reason that says nothing about the document; retrying', { reason, detail: String(detail ?? '').slice(0, 2000) });
          throw ApplicationFailure.create({ message: reason, type: 'ExtractionCrash', nonRetryable: false });
        }
        throw ApplicationFailure.nonRetryable(reason, 'ExtractionError');
      }
    },

    async embedFileChunks(fileId: string): Promise<number> {
      return deps.indexing.embed(fileId, (done) => Context.current().heartbeat(done));
    },

    async finishIndexing(fileId: string) {
      return deps.indexing.finish(fileId);
    },

    async failIndexing(fileId: string, reason: string): Promise<void> {
      await deps.indexing.fail(fileId, reason);
    },

    async recordMessage(plan: SendPlan): Promise<void> {
      await deps.services.messages.record(plan);
    },

    /** One provider call; a rejection the provider will repeat (4xx) is final. */
    async callMsgappProvider(plan: SendPlan): Promise<string> {
      try {
        return await deps.services.messages.callProvider(plan);
      } catch (err) {
        if (err instanceof SendFailedError && !err.retryable) throw ApplicationFailure.nonRetryable(err.reason, 'ProviderRejected');
        throw err;
      }
    },

    async markMessageSent(plan: SendPlan, providerMessageId: string): Promise<void> {
      await deps.services.messages.markSent(plan, providerMessageId);
    },

    async markMessageFailed(plan: SendPlan, error: string): Promise<void> {
      await deps.services.messages.markFailed(plan, error);
    },

    /** Stores a visitor's message once (by its id and the client's message id); says whether it was new and any reply it has. */
    async recordVisitorMessage(input: { conversationId: string; workspaceId: string; messageId: string; clientMessageId: string; text: string; uploadIds: string[] }) {
      const { row, created } = await deps.services.transcript.append({
        id: input.messageId,
        workspaceId: input.workspaceId,
        conversationId: input.conversationId,
        role: 'user',
        text: input.text,
        clientMessageId: input.clientMessageId,
        attachments: input.uploadIds.map((id) => ({ upload_id: id })),
      });
      const reply = created ? null : await deps.services.transcript.replyTo(row.id);
      return { created, message_id: row.id, reply_id: reply?.id ?? null };
    },

    /** One agent turn: retrieval, the model (streamed to the sockets), tools, the stored reply. */
    async runAgentTurn(input: { conversationId: string; workspaceId: string; messageId: string; replyId: string }) {
      try {
        return await withHeartbeat(() => deps.services.turns.run(input, () => Context.current().heartbeat()));
      } catch (err) {
        if (err instanceof LlmError && !err.retryable) throw ApplicationFailure.nonRetryable(err.message, 'LlmRejected');
        // The provider's Retry-After is a hint for the next attempt (capped: a visitor is
        // waiting); the workflow's retry policy still bounds the attempts. Same type and
        // message as the LlmError would have had.
        if (err instanceof LlmError && err.retryAfterMs !== undefined) {
          throw ApplicationFailure.create({ message: err.message, type: 'LlmError', nextRetryDelay: Math.min(err.retryAfterMs, MAX_LLM_RETRY_AFTER_MS) });
        }
        throw err;
      }
    },

    /** Tells the conversation's sockets that a turn failed. */
    async publishTurnError(input: { conversationId: string; replyId: string; code: 'workflow_provisioning' | 'workflow_execution_failed'; text: string }) {
      await publishFrame(deps.em, input.conversationId, { type: 'error', reply_id: input.replyId, code: input.code, text: input.text });
    },

    async recordTaskStarted(input: { conversationId: string; workspaceId: string; taskKey: string; kind: string; label: string; blocking: boolean; workflowId: string }) {
      await deps.em.fork().execute(
        `insert into conversation_tasks (conversation_id, task_key, workspace_id, kind, label, status, blocking, workflow_id)
         values (?, ?, ?, ?, ?, 'running', ?, ?)
         on conflict (conversation_id, task_key) do update set status = 'running', label = excluded.label, error = null, finished_at = null, started_at = clock_timestamp()`,
        [input.conversationId, input.taskKey, input.workspaceId, input.kind, input.label, input.blocking, input.workflowId],
      );
      await publishFrame(deps.em, input.conversationId, { type: 'task_status', task_key: input.taskKey, label: input.label, status: 'running' });
    },

    async recordTaskFinished(input: { conversationId: string; taskKey: string; label: string; status: 'running' | 'completed' | 'cancelled' | 'failed'; error: string | null }) {
      await deps.em
        .fork()
        .execute(`update conversation_tasks set status = ?, error = ?, finished_at = clock_timestamp() where conversation_id = ? and task_key = ?`, [
          input.status,
          input.error,
          input.conversationId,
          input.taskKey,
        ]);
      await publishFrame(deps.em, input.conversationId, { type: 'task_status', task_key: input.taskKey, label: input.label, status: input.status });
    },

    /** A long upload's passages, for search in its conversation. */
    async indexUploadForSearch(uploadId: string): Promise<number> {
      return withHeartbeat(() => deps.services.uploads.indexForSearch(uploadId));
    },

    /** Settles a delivery run and updates its subscription's failure accounting. */
    async recordWebhookOutcome(input: { deliveryId: string; run: number; delivered: boolean; error: string | null }) {
      return deps.services.deliveries.recordOutcome(input.deliveryId, input.run, input.delivered, input.error);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
