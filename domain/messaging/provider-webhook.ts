import type { Logger } from 'pino';
import type { ParsedWebhook } from '../ports/msgapp';
import type { ProviderEventService } from './provider-events';

/**
 * POST /webhooks/msgapp once its signature is checked and its payload parsed: statuses
 * applied inline (one idempotent transaction each); inbound messages stored once per
 * provider message id — one without media recorded there with its `message.inbound`, one
 * with media by its own `msgapp-inbound:<wamid>` workflow (the worker's relay starts it).
 * A message for a number no published agent owns is logged and dropped.
 */
export class ProviderWebhook {
  constructor(private readonly events: Pick<ProviderEventService, 'applyStatus' | 'accept'>) {}

  async receive(parsed: Pick<ParsedWebhook, 'statuses' | 'inbound'>, log: Pick<Logger, 'warn'>): Promise<void> {
    for (const s of parsed.statuses) await this.events.applyStatus(s);
    for (const m of parsed.inbound) {
      const outcome = await this.events.accept(m);
      if (outcome === 'no_agent') log.warn({ phoneNumberId: m.phoneNumberId }, 'inbound message for a number no published agent owns');
    }
  }
}
