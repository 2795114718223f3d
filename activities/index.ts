import { ApplicationFailure, Context } from '@temporalio/activity';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { IndexingService } from '../core/kb/indexing';
import type { SendPlan } from '../core/messages/plan';
import { SendFailedError } from '../core/messages/messages';
import type { Services } from '../core/services';

export interface ActivityDeps {
  em: EntityManager;
  services: Pick<Services, 'idempotency' | 'deliveries' | 'blobs' | 'messages'>;
  indexing: IndexingService;
}

/** Extraction failures that say nothing about the document, so a retry may succeed. */
const TRANSIENT_EXTRACTION = new Set(['extraction process crashed', 'extraction could not start']);

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
        const { reason, detail } = err as { reason?: unknown; detail?: unknown };
        if (typeof reason !== 'string') throw err;
        // A process that died or never started says nothing about the document: try again.
        if (TRANSIENT_EXTRACTION.has(reason)) {
          Context.current().log.warn('extraction process failed; retrying', { reason, detail: String(detail ?? '').slice(0, 2000) });
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

    /** Settles a delivery run and updates its subscription's failure accounting. */
    async recordWebhookOutcome(input: { deliveryId: string; run: number; delivered: boolean; error: string | null }) {
      return deps.services.deliveries.recordOutcome(input.deliveryId, input.run, input.delivered, input.error);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
