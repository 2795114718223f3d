import type { Logger } from 'pino';
import { Batcher } from '../../lib/batcher';
import type { InboundMessage, ParsedWebhook, StatusUpdate } from '../ports/msgapp';
import type { AcceptOutcome, ProviderEventService } from './provider-events';

/** Status updates applied in one transaction at most (a carrier sends three per outbound message). */
const STATUS_BATCH = 100;
/** Inbound messages stored in one transaction at most. */
const INBOUND_BATCH = 50;
/**
 * Transactions of each kind at once: while it runs, the next batch gathers. One: on a 2-core machine fewer, larger
 * transactions answer sooner than more, smaller ones (the msgapp-inbound bench: ack p50 108 ms with one, 488 ms with
 * two, 1.9 s with four, under 100 messages and 300 statuses a second).
 */
const FLUSHES = 1;

/** `apply` on the whole batch; if it fails, on each item alone, so only the item that fails fails. */
async function eachAlone<I, R>(items: I[], apply: (items: I[]) => Promise<R[]>): Promise<Array<R | Error>> {
  const asError = (e: unknown) => (e instanceof Error ? e : new Error(String(e)));
  try {
    return await apply(items);
  } catch (err) {
    if (items.length === 1) return [asError(err)];
    const outcomes: Array<R | Error> = [];
    for (const item of items) outcomes.push(await apply([item]).then((r) => r[0], asError));
    return outcomes;
  }
}

/**
 * POST /webhooks/msgapp once its signature is checked and its payload parsed: statuses
 * and inbound messages are each batched with those of the requests that arrive meanwhile
 * (one transaction per batch; a batch that fails is applied again item by item, so one
 * bad item fails only its own request, which the provider sends again). Inbound messages
 * are stored once per provider message id — one without media recorded there with its `message.inbound`, one
 * with media by its own `msgapp-inbound:<wamid>` workflow (the worker's relay starts it).
 * A message for a number no published agent owns is logged and dropped. The provider
 * gets its 200 only once everything of its request is committed.
 */
export class ProviderWebhook {
  private readonly statuses: Batcher<StatusUpdate, Awaited<ReturnType<ProviderEventService['applyStatuses']>>[number]>;
  private readonly inbound: Batcher<InboundMessage, AcceptOutcome>;

  constructor(events: Pick<ProviderEventService, 'applyStatuses' | 'acceptMany'>) {
    this.statuses = new Batcher((updates) => eachAlone(updates, (u) => events.applyStatuses(u)), { maxBatch: STATUS_BATCH, concurrency: FLUSHES });
    this.inbound = new Batcher((msgs) => eachAlone(msgs, (m) => events.acceptMany(m)), { maxBatch: INBOUND_BATCH, concurrency: FLUSHES });
  }

  async receive(parsed: Pick<ParsedWebhook, 'statuses' | 'inbound'>, log: Pick<Logger, 'warn'>): Promise<void> {
    // In the request's order: a later status of the same message is applied after an earlier one.
    for (const s of parsed.statuses) await this.statuses.submit(s);
    for (const m of parsed.inbound) {
      const outcome = await this.inbound.submit(m);
      if (outcome === 'no_agent') log.warn({ phoneNumberId: m.phoneNumberId }, 'inbound message for a number no published agent owns');
    }
  }
}
