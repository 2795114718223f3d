import { recordAudit, SYSTEM_CONTEXT, type AuditContext } from '../audit/audit-log';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SealedSecrets, SecretBox } from '../../lib/crypto/secret-box';
import { WebhookSubscription, type IWebhookSubscription } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { checkUrl, UnsafeUrlError } from '../../lib/net/ssrf';
import type { EventEnvelope, SubscribableEvent } from './events';
import { newSecret, sendSigned, type SenderSettings } from './sender';
import type { SubscriptionHealth } from './deliveries';
import type { WebhookRepository } from './emitter';

export interface SubscriptionView {
  id: string;
  url: string;
  events: SubscribableEvent[];
  status: 'active' | 'disabled';
  consecutive_failures: number;
  last_error: string | null;
  last_failed_at: string | null;
  last_delivered_at: string | null;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

export function subscriptionView(r: IWebhookSubscription): SubscriptionView {
  return {
    id: r.id,
    url: r.url,
    events: r.events as SubscribableEvent[],
    status: r.status,
    consecutive_failures: r.consecutiveFailures,
    last_error: r.lastError ?? null,
    last_failed_at: iso(r.lastFailedAt),
    last_delivered_at: iso(r.lastDeliveredAt),
    disabled_reason: r.disabledReason ?? null,
    created_at: iso(r.createdAt)!,
    updated_at: iso(r.updatedAt)!,
  };
}

/** A subscription created after the health read: nothing failing yet. */
const emptyHealth = (r: IWebhookSubscription): SubscriptionHealth => ({ failing_since: null, retrying_now: 0, failed_now: 0, last_error: null, last_delivered_at: iso(r.lastDeliveredAt) });

export interface SubscriptionPatch {
  url?: string;
  events?: SubscribableEvent[];
  status?: 'active' | 'disabled';
  rotate_secret?: boolean;
}

/**
 * Webhook subscriptions. The signing secret is sealed with AES-256-GCM (bound to the
 * subscription id) and only ever returned at creation and rotation. URLs are checked
 * against the SSRF policy at registration; the delivery client checks again at connect.
 */
export class SubscriptionService {
  /** Webhook signing secrets sealed with the service's key (the key is checked against them at start-up, before any service exists). */
  static async sealedSigningSecrets(em: EntityManager): Promise<SealedSecrets> {
    const count = await em.count(WebhookSubscription);
    const [row] = count ? await em.find(WebhookSubscription, {}, { fields: ['id', 'secretSealed'], limit: 1 }) : [];
    return { count, sample: row ? { id: row.id, sealed: row.secretSealed } : null };
  }

  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly sender: SenderSettings,
    private readonly webhooks: Pick<WebhookRepository, 'subscriptionHealth'>,
  ) {}

  private async validateUrl(url: string): Promise<string> {
    try {
      return (await checkUrl(url, this.sender.policy, this.sender.resolve)).url.toString();
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new DomainError('invalid_url', `url: ${err.reason}`, { reason: err.reason });
      throw err;
    }
  }

  async create(workspaceId: string, url: string, events: SubscribableEvent[]): Promise<SubscriptionView & { secret: string }> {
    const checked = await this.validateUrl(url);
    const id = newId('whk');
    const secret = newSecret();
    const em = this.em.fork();
    const row = em.create(WebhookSubscription, {
      id,
      workspaceId,
      url: checked,
      events: [...new Set(events)],
      status: 'active',
      secretSealed: this.box.seal(secret, id),
      consecutiveFailures: 0,
      lastError: null,
      lastFailedAt: null,
      lastDeliveredAt: null,
      disabledReason: null,
    });
    await em.flush();
    return { ...subscriptionView(row), secret };
  }

  /** The subscriptions with their health (what is failing or retrying now). */
  async list(workspaceId: string): Promise<Array<SubscriptionView & { health: SubscriptionHealth }>> {
    const em = this.em.fork();
    const [rows, health] = await Promise.all([em.find(WebhookSubscription, { workspaceId }, { orderBy: { createdAt: 'asc', id: 'asc' } }), this.webhooks.subscriptionHealth(this.em.fork(), workspaceId)]);
    return rows.map((r) => ({ ...subscriptionView(r), health: health.get(r.id) ?? emptyHealth(r) }));
  }

  async get(workspaceId: string, id: string): Promise<SubscriptionView & { health: SubscriptionHealth }> {
    const row = await this.row(this.em.fork(), workspaceId, id);
    const health = await this.webhooks.subscriptionHealth(this.em.fork(), workspaceId, id);
    return { ...subscriptionView(row), health: health.get(id) ?? emptyHealth(row) };
  }

  private async row(em: EntityManager, workspaceId: string, id: string, lock = false): Promise<IWebhookSubscription> {
    const row = await em.findOne(WebhookSubscription, { id, workspaceId }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
    if (!row) throw new DomainError('not_found', `No webhook subscription with id '${id}' in this workspace`);
    return row;
  }

  async update(workspaceId: string, id: string, patch: SubscriptionPatch, ctx: AuditContext = SYSTEM_CONTEXT): Promise<SubscriptionView & { secret?: string }> {
    const url = patch.url === undefined ? undefined : await this.validateUrl(patch.url);
    return this.em.fork().transactional(async (em) => {
      const row = await this.row(em, workspaceId, id, true);
      if (url !== undefined) row.url = url;
      if (patch.events !== undefined) row.events = [...new Set(patch.events)];
      if (patch.status === 'active') {
        row.status = 'active';
        row.consecutiveFailures = 0;
        row.disabledReason = null;
      } else if (patch.status === 'disabled') {
        row.status = 'disabled';
        row.disabledReason ??= 'disabled through the API';
      }
      let secret: string | undefined;
      if (patch.rotate_secret) {
        secret = newSecret();
        row.secretSealed = this.box.seal(secret, id);
      }
      row.updatedAt = new Date();
      await em.flush();
      if (secret) await recordAudit(em, ctx, { workspaceId, action: 'webhook_subscription.secret_rotated', target: { type: 'webhook_subscription', id } });
      return secret ? { ...subscriptionView(row), secret } : subscriptionView(row);
    });
  }

  async delete(workspaceId: string, id: string): Promise<void> {
    const deleted = await this.em.fork().nativeDelete(WebhookSubscription, { id, workspaceId });
    if (deleted === 0) throw new DomainError('not_found', `No webhook subscription with id '${id}' in this workspace`);
  }

  /** The signing secret, for the delivery activity only. */
  openSecret(row: { id: string; secretSealed: string }): string {
    return this.box.open(row.secretSealed, row.id);
  }

  /** A synchronous `webhook.test` delivery with the same envelope, headers and signature as real ones. */
  async sendTest(workspaceId: string, id: string): Promise<{ delivered: boolean; status: number; error?: string }> {
    const row = await this.row(this.em.fork(), workspaceId, id);
    const envelope: EventEnvelope = {
      id: newId('evt'),
      event: 'webhook.test',
      created_at: new Date().toISOString(),
      data: { subscription_id: id, message: 'This is a test delivery from Concierge.' },
    };
    const outcome = await sendSigned(this.sender, {
      url: row.url,
      secret: this.openSecret(row),
      eventType: 'webhook.test',
      deliveryId: newId('dlv'),
      body: JSON.stringify(envelope),
    });
    if (outcome.statusCode === 0) return { delivered: false, status: 0, error: outcome.error ?? 'transport error' };
    return { delivered: outcome.ok, status: outcome.statusCode };
  }
}
