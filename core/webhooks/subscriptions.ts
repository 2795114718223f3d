import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../crypto/secret-box';
import { textArray } from '../db/sql';
import { ApiError } from '../errors';
import { newId } from '../ids';
import { checkUrl, UnsafeUrlError } from '../net/ssrf';
import type { EventEnvelope, SubscribableEvent } from './events';
import { newSecret, sendSigned, type SenderSettings } from './sender';

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

interface Row {
  id: string;
  workspace_id: string;
  url: string;
  events: SubscribableEvent[];
  status: 'active' | 'disabled';
  secret_sealed: string;
  consecutive_failures: number;
  last_error: string | null;
  last_failed_at: Date | null;
  last_delivered_at: Date | null;
  disabled_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function subscriptionView(r: Row): SubscriptionView {
  return {
    id: r.id,
    url: r.url,
    events: r.events,
    status: r.status,
    consecutive_failures: r.consecutive_failures,
    last_error: r.last_error,
    last_failed_at: iso(r.last_failed_at),
    last_delivered_at: iso(r.last_delivered_at),
    disabled_reason: r.disabled_reason,
    created_at: iso(r.created_at)!,
    updated_at: iso(r.updated_at)!,
  };
}

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
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly sender: SenderSettings,
  ) {}

  private async validateUrl(url: string): Promise<string> {
    try {
      return (await checkUrl(url, this.sender.policy, this.sender.resolve)).url.toString();
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new ApiError(400, 'invalid_url', `url: ${err.reason}`, { reason: err.reason });
      throw err;
    }
  }

  async create(workspaceId: string, url: string, events: SubscribableEvent[]): Promise<SubscriptionView & { secret: string }> {
    const checked = await this.validateUrl(url);
    const id = newId('whk');
    const secret = newSecret();
    const [row] = await this.em.fork().execute<Row[]>(
      `insert into webhook_subscriptions (id, workspace_id, url, events, status, secret_sealed)
       values (?, ?, ?, ?::text[], 'active', ?) returning *`,
      [id, workspaceId, checked, textArray([...new Set(events)]), this.box.seal(secret, id)],
    );
    return { ...subscriptionView(row), secret };
  }

  async list(workspaceId: string): Promise<SubscriptionView[]> {
    const rows = await this.em.fork().execute<Row[]>('select * from webhook_subscriptions where workspace_id = ? order by created_at, id', [workspaceId]);
    return rows.map(subscriptionView);
  }

  async get(workspaceId: string, id: string): Promise<SubscriptionView> {
    return subscriptionView(await this.row(this.em.fork(), workspaceId, id));
  }

  private async row(em: EntityManager, workspaceId: string, id: string, lock = false): Promise<Row> {
    const [row] = await em.execute<Row[]>(`select * from webhook_subscriptions where id = ? and workspace_id = ?${lock ? ' for update' : ''}`, [id, workspaceId]);
    if (!row) throw new ApiError(404, 'not_found', `No webhook subscription with id '${id}' in this workspace`);
    return row;
  }

  async update(workspaceId: string, id: string, patch: SubscriptionPatch): Promise<SubscriptionView & { secret?: string }> {
    const url = patch.url === undefined ? undefined : await this.validateUrl(patch.url);
    return this.em.fork().transactional(async (em) => {
      await this.row(em, workspaceId, id, true);
      const sets: string[] = [];
      const params: unknown[] = [];
      const set = (sql: string, value: unknown) => {
        sets.push(sql);
        params.push(value);
      };
      if (url !== undefined) set('url = ?', url);
      if (patch.events !== undefined) set('events = ?::text[]', textArray([...new Set(patch.events)]));
      if (patch.status === 'active') {
        sets.push(`status = 'active', consecutive_failures = 0, disabled_reason = null`);
      } else if (patch.status === 'disabled') {
        sets.push(`status = 'disabled', disabled_reason = coalesce(disabled_reason, 'disabled through the API')`);
      }
      let secret: string | undefined;
      if (patch.rotate_secret) {
        secret = newSecret();
        set('secret_sealed = ?', this.box.seal(secret, id));
      }
      sets.push('updated_at = now()');
      const [row] = await em.execute<Row[]>(`update webhook_subscriptions set ${sets.join(', ')} where id = ? returning *`, [...params, id]);
      return secret ? { ...subscriptionView(row), secret } : subscriptionView(row);
    });
  }

  async delete(workspaceId: string, id: string): Promise<void> {
    const rows = await this.em.fork().execute('delete from webhook_subscriptions where id = ? and workspace_id = ? returning id', [id, workspaceId]);
    if (rows.length === 0) throw new ApiError(404, 'not_found', `No webhook subscription with id '${id}' in this workspace`);
  }

  /** The signing secret, for the delivery activity only. */
  openSecret(row: { id: string; secret_sealed: string }): string {
    return this.box.open(row.secret_sealed, row.id);
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
