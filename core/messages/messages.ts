import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../crypto/secret-box';
import { ApiError } from '../errors';
import { OperationalError } from '../failures';
import { newId } from '../ids';
import type { MsgappProvider } from '../msgapp/provider';
import { Filters, keysetPage } from '../pagination';
import { emitEvent } from '../webhooks/emitter';
import { planSend, type SendBody, type SendPlan } from './plan';

export interface MessageView {
  id: string;
  conversation_id: string | null;
  customer_id: string | null;
  agent_id: string | null;
  channel: 'msgapp';
  from: string;
  to: string;
  kind: SendPlan['kind'];
  text: string | null;
  template_name?: string;
  /** The contract's four: a message is readable once the provider answered (see READABLE). */
  status: 'sent' | 'delivered' | 'read' | 'failed';
  status_history: Array<{ status: string; at: string; error?: string }>;
  error: string | null;
  provider_message_id: string | null;
  created_at: string;
  updated_at: string;
}

interface Row {
  id: string;
  conversation_id: string | null;
  customer_id: string | null;
  agent_id: string | null;
  from_number: string;
  to_number: string;
  kind: SendPlan['kind'];
  text: string | null;
  template_name: string | null;
  status: MessageView['status'] | 'sending' | 'received';
  status_history: MessageView['status_history'];
  error: string | null;
  provider_message_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Which rows the message resource shows: outbound messages the provider has answered for.
 * A message still being sent (`sending`: recorded, the provider's answer not yet stored)
 * is not readable yet — the contract's statuses are sent, delivered, read, failed, and the
 * send request returns its id only once the provider answered. Inbound messages are not
 * messages of this resource (no delivery status; the list holds API sends only): they are
 * read through their conversation's events and arrive as `message.inbound`.
 */
const READABLE = `direction = 'outbound' and status in ('sent', 'delivered', 'read', 'failed')`;

export function messageView(r: Row): MessageView {
  return {
    id: r.id,
    conversation_id: r.conversation_id,
    customer_id: r.customer_id,
    agent_id: r.agent_id,
    channel: 'msgapp',
    from: r.from_number,
    to: r.to_number,
    kind: r.kind,
    text: r.text,
    ...(r.kind === 'template' && r.template_name ? { template_name: r.template_name } : {}),
    status: r.status as MessageView['status'],
    status_history: r.status_history,
    error: r.error,
    provider_message_id: r.provider_message_id,
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
}

/** A send the provider did not take; `ProviderRejected` when it will refuse it again (a 4xx). */
export class SendFailedError extends OperationalError {
  constructor(
    readonly reason: string,
    retryable: boolean,
  ) {
    super(retryable ? 'SendFailed' : 'ProviderRejected', reason, retryable);
  }
}

/**
 * Outbound messages: the steps of the send workflow (record, call the provider, mark
 * sent or failed), and the read side of the API. Every step is idempotent on the
 * message id, which the workflow id also carries.
 */
export class MessageService {
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly provider: MsgappProvider | null,
  ) {}

  /** Whether a provider is configured at all. */
  get configured(): boolean {
    return this.provider !== null;
  }

  /** Applies the send rules; nothing is recorded. */
  plan(workspaceId: string, body: SendBody): Promise<SendPlan> {
    return planSend(this.em.fork(), workspaceId, body);
  }

  /** Records the message (status `sending`) with its customer and conversation, found or created. */
  async record(plan: SendPlan): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const exists = await em.execute('select 1 from messages where id = ?', [plan.messageId]);
      if (exists.length) return;
      let customerId = plan.customerId;
      if (!customerId) {
        await em.execute(
          `with c as (insert into customers (id, workspace_id, phone) select ?, ?, ?
                      where not exists (select 1 from customer_identities where workspace_id = ? and kind = 'phone' and value = ?) returning id)
           insert into customer_identities (workspace_id, kind, value, customer_id) select ?, 'phone', ?, id from c on conflict do nothing`,
          [newId('cus'), plan.workspaceId, plan.to, plan.workspaceId, plan.to, plan.workspaceId, plan.to],
        );
        const [owner] = await em.execute<{ customer_id: string }[]>(`select customer_id from customer_identities where workspace_id = ? and kind = 'phone' and value = ?`, [
          plan.workspaceId,
          plan.to,
        ]);
        customerId = owner.customer_id;
      }
      const [open] = await em.execute<{ id: string }[]>(
        `select id from conversations where workspace_id = ? and customer_id = ? and agent_id = ? and channel = 'msgapp' and status = 'open'
         order by created_at desc limit 1 for update`,
        [plan.workspaceId, customerId, plan.agentId],
      );
      const conversationId = open?.id ?? newId('conv');
      if (!open) {
        await em.execute(`insert into conversations (id, workspace_id, customer_id, agent_id, channel, status) values (?, ?, ?, ?, 'msgapp', 'open')`, [
          conversationId,
          plan.workspaceId,
          customerId,
          plan.agentId,
        ]);
      }
      await em.execute(
        `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, template_name, content, status)
         values (?, ?, ?, ?, ?, 'outbound', 'api', 'msgapp', ?, ?, ?, ?, ?, ?::jsonb, 'sending')`,
        [plan.messageId, plan.workspaceId, conversationId, customerId, plan.agentId, plan.fromNumber, plan.to, plan.kind, plan.text, plan.templateName, JSON.stringify(plan.content)],
      );
    });
  }

  /** One call to the provider. The message id travels with it, so status callbacks can be matched to it. */
  async callProvider(plan: SendPlan): Promise<string> {
    if (!this.provider) throw new SendFailedError('no msgapp provider is configured (MSGAPP_API_BASE)', false);
    const [cred] = await this.em.fork().execute<{ id: string; secret_sealed: string }[]>(
      `select id, secret_sealed from credentials where id = ? and workspace_id = ? and kind = 'msgapp_access_token'`,
      [plan.credentialId, plan.workspaceId],
    );
    if (!cred) throw new SendFailedError(`credential ${plan.credentialId} does not exist`, false);
    try {
      const res = await this.provider.send({
        phoneNumberId: plan.phoneNumberId,
        accessToken: this.box.open(cred.secret_sealed, cred.id),
        to: plan.to,
        content: plan.content,
        clientMessageId: plan.messageId,
      });
      return res.providerMessageId;
    } catch (err) {
      const e = err as { message: string; retryable?: boolean };
      throw new SendFailedError(e.message, e.retryable ?? true);
    }
  }

  /**
   * Provider accepted: the provider id, status `sent`, a usage row, the `message.status`
   * event — one transaction. The provider's own callbacks may have arrived first (they
   * are matched by our message id) and moved the status on; then only the id and the
   * usage row are added here, and no second `sent` event is emitted.
   */
  async markSent(plan: SendPlan, providerMessageId: string): Promise<MessageView> {
    return this.em.fork().transactional(async (em) => {
      const [m] = await em.execute<Row[]>('select * from messages where id = ? for update', [plan.messageId]);
      if (!m) return this.read(em, plan.workspaceId, plan.messageId);
      const transitions = m.status === 'sending';
      await em.execute(
        `update messages set provider_message_id = ?, updated_at = now()${
          transitions
            ? `, status = 'sent', status_history = jsonb_build_array(jsonb_build_object('status', 'sent', 'at', to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) || status_history`
            : ''
        } where id = ?`,
        [providerMessageId, m.id],
      );
      await em.execute(`insert into usage_records (workspace_id, kind, message_id) values (?, 'msgapp_message', ?) on conflict (message_id) do nothing`, [plan.workspaceId, m.id]);
      if (transitions) {
        await em.execute(`insert into conversation_events (id, conversation_id, type, data) values (?, ?, 'message.sent', ?::jsonb)`, [
          newId('evt'),
          m.conversation_id,
          JSON.stringify({ message_id: m.id, kind: m.kind, text: m.text }),
        ]);
        await emitEvent(em, plan.workspaceId, 'message.status', {
          message_id: m.id,
          channel: 'msgapp',
          status: 'sent',
          conversation_id: m.conversation_id,
          occurred_at: new Date().toISOString(),
        });
      }
      return this.read(em, plan.workspaceId, plan.messageId);
    });
  }

  async markFailed(plan: SendPlan, error: string): Promise<MessageView> {
    const em = this.em.fork();
    await em.execute(
      `update messages set status = 'failed', error = ?, updated_at = now(),
         status_history = status_history || jsonb_build_array(jsonb_build_object('status', 'failed', 'at', to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'error', ?::text))
       where id = ? and status = 'sending'`,
      [error, error, plan.messageId],
    );
    return this.read(em, plan.workspaceId, plan.messageId);
  }

  private async read(em: EntityManager, workspaceId: string, id: string): Promise<MessageView> {
    const [row] = await em.execute<Row[]>(`select * from messages where id = ? and workspace_id = ? and ${READABLE}`, [id, workspaceId]);
    if (!row) throw new ApiError(404, 'not_found', `No message with id '${id}' in this workspace`);
    return messageView(row);
  }

  get(workspaceId: string, id: string): Promise<MessageView> {
    return this.read(this.em.fork(), workspaceId, id);
  }

  /** Messages sent through the API, newest first. `since` inclusive, `until` exclusive. */
  async list(
    workspaceId: string,
    q: { to?: string; from?: string; status?: string; since?: string; until?: string; limit: number; cursor?: string },
  ): Promise<{ messages: MessageView[]; next_cursor: string | null }> {
    const f = new Filters('workspace_id = ?', workspaceId).add(`source = 'api'`).add(READABLE);
    if (q.to) f.add('to_number = ?', q.to);
    if (q.from) f.add('from_number = ?', q.from);
    if (q.status) f.add('status = ?', q.status);
    if (q.since) f.add('created_at >= ?::timestamptz', q.since);
    if (q.until) f.add('created_at < ?::timestamptz', q.until);
    const page = await keysetPage<Row>(this.em.fork(), 'select * from messages', f, q);
    return { messages: page.rows.map(messageView), next_cursor: page.next_cursor };
  }
}
