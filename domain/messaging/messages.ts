import { LockMode, type FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { CredentialService } from '../credentials/credentials';
import type { ChatTranscript } from '../chat/transcript';
import type { Repositories } from '../repositories';
import { Message, type IMessage } from '../../db/entities';
import { DomainError } from '../errors';
import { OperationalError } from '../../lib/failures';
import type { MsgappProvider } from '../ports/msgapp';
import { keysetFind } from '../../db/pagination';
import type { SendBody, SendPlan, SendPlanner } from './plan';
import { countSend } from '../metrics';

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

/**
 * Which rows the message resource shows: outbound messages the provider has answered for.
 * A message still being sent (`sending`: recorded, the provider's answer not yet stored)
 * is not readable yet — the contract's statuses are sent, delivered, read, failed, and the
 * send request returns its id only once the provider answered. Inbound messages are not
 * messages of this resource (no delivery status; the list holds API sends only): they are
 * read through their conversation's events and arrive as `message.inbound`.
 */
const READABLE: FilterQuery<IMessage> = { direction: 'outbound', status: { $in: ['sent', 'delivered', 'read', 'failed'] } };

export function messageView(r: IMessage): MessageView {
  return {
    id: r.id,
    conversation_id: r.conversationId ?? null,
    customer_id: r.customerId ?? null,
    agent_id: r.agentId ?? null,
    channel: 'msgapp',
    from: r.fromNumber,
    to: r.toNumber,
    kind: r.kind,
    text: r.text ?? null,
    ...(r.kind === 'template' && r.templateName ? { template_name: r.templateName } : {}),
    status: r.status as MessageView['status'],
    status_history: r.statusHistory,
    error: r.error ?? null,
    provider_message_id: r.providerMessageId ?? null,
    created_at: new Date(r.createdAt).toISOString(),
    updated_at: new Date(r.updatedAt).toISOString(),
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
    private readonly repos: Pick<Repositories, 'conversations' | 'customers' | 'usage' | 'webhooks'>,
    private readonly planner: SendPlanner,
    private readonly transcript: Pick<ChatTranscript, 'appendIn' | 'get'>,
    private readonly credentials: CredentialService,
    private readonly provider: MsgappProvider | null,
  ) {}

  /** Whether a provider is configured at all. */
  get configured(): boolean {
    return this.provider !== null;
  }

  /** Applies the send rules; nothing is recorded. */
  plan(workspaceId: string, body: SendBody): Promise<SendPlan> {
    return this.planner.planSend(this.em.fork(), workspaceId, body);
  }

  /** Records the message (status `sending`) with its customer and conversation, found or created. */
  async record(plan: SendPlan): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      if (await em.count(Message, { id: plan.messageId })) return;
      const customerId = plan.customerId ?? (await this.repos.customers.customerForPhone(em, plan.workspaceId, plan.to));
      const conversationId = plan.conversationId ?? (await this.repos.conversations.openMsgappConversation(em, { workspaceId: plan.workspaceId, customerId, agentId: plan.agentId }));
      await em.insert(Message, {
        id: plan.messageId,
        workspaceId: plan.workspaceId,
        conversationId,
        customerId,
        agentId: plan.agentId,
        direction: 'outbound',
        source: plan.source ?? 'api',
        channel: 'msgapp',
        fromNumber: plan.fromNumber,
        toNumber: plan.to,
        kind: plan.kind,
        text: plan.text,
        templateName: plan.templateName,
        content: plan.content as unknown as Record<string, unknown>,
        status: 'sending',
      });
    });
  }

  /**
   * An agent's stored reply in a msgapp conversation as a send (see SendPlanner.planAgentReply), or
   * why it is not sent, which the conversation's timeline records (`reply.not_sent`).
   */
  async planReply(conversationId: string, replyId: string): Promise<SendPlan | { skipped: string }> {
    const em = this.em.fork();
    const stored = await this.transcript.get(replyId);
    const reply = stored?.conversation_id === conversationId ? stored : null;
    const plan = reply ? await this.planner.planAgentReply(em, { id: reply.id, conversationId, replyTo: reply.reply_to, text: reply.text }) : { skipped: 'the reply is not stored' };
    if ('skipped' in plan) await this.repos.conversations.addConversationEvent(em, conversationId, 'reply.not_sent', { reply_id: replyId, reason: plan.skipped });
    return plan;
  }

  /** One call to the provider. The message id travels with it, so status callbacks can be matched to it. */
  async callProvider(plan: SendPlan): Promise<string> {
    if (!this.provider) throw new SendFailedError('no msgapp provider is configured (MSGAPP_API_BASE)', false);
    const accessToken = await this.credentials.msgappToken(plan.workspaceId, plan.credentialId);
    if (accessToken === null) throw new SendFailedError(`credential ${plan.credentialId} does not exist`, false);
    try {
      const res = await this.provider.send({
        phoneNumberId: plan.phoneNumberId,
        accessToken,
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
      const m = await em.findOne(Message, { id: plan.messageId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!m) return this.read(em, plan.workspaceId, plan.messageId);
      const transitions = m.status === 'sending';
      // Only this step sets the provider's id: set already, this is a repeat of a step that committed.
      const firstMark = !m.providerMessageId;
      m.providerMessageId = providerMessageId;
      m.updatedAt = new Date();
      if (transitions) {
        m.status = 'sent';
        m.statusHistory = [{ status: 'sent', at: new Date().toISOString() }, ...m.statusHistory];
      }
      await em.flush();
      if (firstMark) countSend('sent');
      await this.repos.usage.recordMessageUsage(em, { workspaceId: plan.workspaceId, messageId: m.id });
      // A message sent through the API is the business writing (a human agent, or its backend): the agent reads it
      // in the transcript from now on. An agent's reply is in the transcript already, under this id.
      // Whether or not the provider's own callback moved the status first: the insert is idempotent on the id.
      if (m.source === 'api' && m.conversationId) {
        await this.transcript.appendIn(em, {
          id: m.id,
          workspaceId: m.workspaceId,
          conversationId: m.conversationId,
          role: 'human',
          text: m.text ?? `[${[m.kind, m.templateName].filter(Boolean).join(' ')}]`,
        });
      }
      // The timeline's record of the send, once, even when the provider's callback came first.
      // `author`: the agent's reply, or a message sent through the API (a human agent or the business's backend).
      if (firstMark && m.conversationId) await this.repos.conversations.addConversationEvent(em, m.conversationId, 'message.sent', { message_id: m.id, kind: m.kind, text: m.text ?? null, author: m.source === 'agent' ? 'agent' : 'api' });
      if (transitions) {
        await this.repos.webhooks.emitEvent(em, plan.workspaceId, 'message.status', {
          message_id: m.id,
          channel: 'msgapp',
          status: 'sent',
          conversation_id: m.conversationId ?? null,
          occurred_at: new Date().toISOString(),
        });
      }
      return this.read(em, plan.workspaceId, plan.messageId);
    });
  }

  async markFailed(plan: SendPlan, error: string): Promise<MessageView> {
    return this.em.fork().transactional(async (em) => {
      const m = await em.findOne(Message, { id: plan.messageId, status: 'sending' }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (m) {
        m.status = 'failed';
        m.error = error;
        m.updatedAt = new Date();
        m.statusHistory = [...m.statusHistory, { status: 'failed', at: new Date().toISOString(), error }];
        await em.flush();
        countSend('failed');
      }
      return this.read(em, plan.workspaceId, plan.messageId);
    });
  }

  /** Outbound messages still `sending`, untouched since `before`: the reconciliation asks Temporal about each send. */
  async stillSending(before: Date, limit: number): Promise<string[]> {
    const rows = await this.em.fork().find(Message, { direction: 'outbound', status: 'sending', updatedAt: { $lt: before } }, { fields: ['id'], orderBy: { updatedAt: 'asc' }, limit });
    return rows.map((r) => r.id);
  }

  /** A send whose workflow ended without marking it (terminated): `failed` with the reason; only from `sending`. */
  async failStranded(messageId: string, error: string): Promise<boolean> {
    return this.em.fork().transactional(async (em) => {
      const m = await em.findOne(Message, { id: messageId, status: 'sending' }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!m) return false;
      m.status = 'failed';
      m.error = error;
      m.updatedAt = new Date();
      m.statusHistory = [...m.statusHistory, { status: 'failed', at: new Date().toISOString(), error }];
      await em.flush();
      return true;
    });
  }

  private async read(em: EntityManager, workspaceId: string, id: string): Promise<MessageView> {
    const row = await em.findOne(Message, { $and: [{ id, workspaceId }, READABLE] });
    if (!row) throw new DomainError('not_found', `No message with id '${id}' in this workspace`);
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
    const where: FilterQuery<IMessage>[] = [{ workspaceId, source: 'api' }, READABLE];
    if (q.to) where.push({ toNumber: q.to });
    if (q.from) where.push({ fromNumber: q.from });
    if (q.status) where.push({ status: q.status as IMessage['status'] });
    if (q.since) where.push({ createdAt: { $gte: new Date(q.since) } });
    if (q.until) where.push({ createdAt: { $lt: new Date(q.until) } });
    const page = await keysetFind(this.em.fork(), Message, { $and: where }, q);
    return { messages: page.rows.map(messageView), next_cursor: page.next_cursor };
  }
}
