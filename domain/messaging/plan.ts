import { sql } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Repositories } from '../repositories';
import { Message, type IAgent } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import type { OutboundContent } from '../ports/msgapp';

/** The send body after schema validation; the rules below decide whether it may go out. */
export interface SendBody {
  channel?: string;
  from?: string;
  agent_id?: string;
  to: string;
  customer_id?: string;
  text?: string;
  media?: { type: 'image' | 'audio' | 'video' | 'document'; url: string; caption?: string; filename?: string };
  location?: { latitude: number; longitude: number; name?: string; address?: string };
  template?: { name: string; language?: string; variables?: string[] };
}

/** Everything the send workflow needs, decided before anything is recorded. */
export interface SendPlan {
  messageId: string;
  workspaceId: string;
  agentId: string;
  fromNumber: string;
  phoneNumberId: string;
  credentialId: string;
  to: string;
  customerId: string | null;
  content: OutboundContent;
  kind: 'text' | 'template' | 'image' | 'audio' | 'video' | 'document' | 'location';
  text: string | null;
  templateName: string | null;
  /** Who sends it: `api` (POST /api/v1/messages, the resource's list) or `agent` (an agent's reply, read through its conversation). */
  source?: 'api' | 'agent';
  /** The conversation it belongs to, when it is decided already (an agent's reply); else found or created when recorded. */
  conversationId?: string;
}

/** Non-template messages need a customer message on the number within this window. */
export const SESSION_WINDOW_HOURS = 24;

const invalid = (message: string) => new DomainError('invalid_request', message);

/** WhatsApp's limit on a text message's body. */
export const MAX_TEXT_CHARS = 4096;

/**
 * The send rules, applied before anything is recorded. The agent and the customer a send
 * names are read through their repositories; each method runs on the EntityManager it is
 * given.
 */
export class SendPlanner {
  constructor(private readonly repos: Pick<Repositories, 'agents' | 'customers'>) {}

  /**
   * The contract's send rules (docs/contract.md), in order, with their codes. Reads only: nothing is
   * recorded until every rule passed (rule 4: "before anything is recorded").
   */
  async planSend(em: EntityManager, workspaceId: string, body: SendBody): Promise<SendPlan> {
    if (body.channel !== undefined && body.channel !== 'msgapp') {
      throw invalid(`channel: only 'msgapp' is sent here; other channels use POST /api/v1/outbound`);
    }
    // Rule 1: exactly one content kind.
    const kinds = (['text', 'media', 'location', 'template'] as const).filter((k) => body[k] !== undefined);
    if (kinds.length !== 1) {
      throw invalid(`text, media, location, template: exactly one is required${kinds.length ? ` (got ${kinds.join(', ')})` : ''}`);
    }
    if (body.from && body.agent_id) throw invalid('from, agent_id: send one of them, not both');
    if (!body.from && !body.agent_id) throw invalid('from: required (or agent_id)');
    // Rule 5: media fields.
    if (body.media) {
      if (body.media.type === 'audio' && body.media.caption !== undefined) throw invalid('media.caption: not allowed on audio');
      if (body.media.type !== 'document' && body.media.filename !== undefined) throw invalid('media.filename: only allowed on a document');
    }

    // Rule 3: the sender.
    let agent: IAgent;
    if (body.agent_id) {
      const row = await this.repos.agents.findAgent(em, workspaceId, body.agent_id);
      if (!row) throw new DomainError('not_found', `No agent with id '${body.agent_id}' in this workspace`);
      agent = row;
    } else {
      const claimants = await this.repos.agents.agentsOnNumber(em, workspaceId, body.from!);
      const published = claimants.filter((a) => a.status === 'published');
      if (published.length > 1) {
        throw new DomainError('ambiguous_sender', `${published.length} published agents claim ${body.from}; send agent_id to choose`, { agent_ids: published.map((a) => a.id) });
      }
      if (published.length === 0) {
        if (claimants.length) throw new DomainError('agent_not_published', `The agent that owns ${body.from} is a draft; publish it first`, { agent_id: claimants[0].id });
        throw new DomainError('not_found', `No published agent claims the number ${body.from}`);
      }
      agent = published[0];
    }
    // Rule 4, then the agent's ability to run.
    if (agent.status !== 'published') throw new DomainError('agent_not_published', `Agent ${agent.id} is a draft; publish it first`, { agent_id: agent.id });
    if (!agent.spec.actions.some((a) => a.type === 'sender')) {
      throw new DomainError('sender_not_authorized', `Agent ${agent.id} has no sender action on its canvas`, { agent_id: agent.id });
    }
    const msgapp = agent.spec.triggers.msgapp;
    const reasons = [...agent.invalidReasons, ...(msgapp ? [] : ['the agent has no msgapp number'])];
    if (reasons.length || !msgapp?.credential_id) {
      throw new DomainError('sender_agent_invalid', `Agent ${agent.id} cannot run: ${reasons.join('; ') || 'no credential'}`, { agent_id: agent.id, reasons });
    }
    if (body.from && body.from !== msgapp.number) throw invalid(`from: agent ${agent.id} sends on ${msgapp.number}`);

    if (body.customer_id) {
      if (!(await this.repos.customers.customerExists(em, workspaceId, body.customer_id))) throw new DomainError('not_found', `No customer with id '${body.customer_id}' in this workspace`);
    }

    let content: OutboundContent;
    if (body.template) {
      const wanted = body.template;
      const found = agent.spec.templates.find((t) => t.name === wanted.name && (!wanted.language || t.language === wanted.language) && t.status === 'approved');
      if (!found) {
        throw new DomainError('template_not_approved', `Template '${wanted.name}' is not registered and approved for ${msgapp.number}`);
      }
      content = { kind: 'template', name: found.name, language: found.language, variables: wanted.variables };
    } else {
      // Rule 2: outside the 24-hour window only a template is deliverable.
      const open = await em.findOne(
        Message,
        // raw SQL: the window is measured on the database clock (now()), the clock that stamped the inbound message.
        // eslint-disable-next-line no-restricted-syntax
        { workspaceId, direction: 'inbound', fromNumber: body.to, toNumber: msgapp.number, createdAt: { $gt: sql`now() - make_interval(hours => ${SESSION_WINDOW_HOURS})` } },
        { orderBy: { createdAt: 'desc' }, fields: ['id', 'createdAt'] },
      );
      if (!open) {
        throw new DomainError('session_window_closed', `${body.to} has not written to ${msgapp.number} in the last ${SESSION_WINDOW_HOURS} hours; only a template can be sent`);
      }
      if (body.text !== undefined) content = { kind: 'text', text: body.text };
      else if (body.location) content = { kind: 'location', ...body.location };
      else {
        const m = body.media!;
        content =
          m.type === 'audio'
            ? { kind: 'audio', url: m.url }
            : m.type === 'document'
              ? { kind: 'document', url: m.url, caption: m.caption, filename: m.filename }
              : { kind: m.type, url: m.url, caption: m.caption };
      }
    }

    return {
      messageId: newId('msg'),
      workspaceId,
      agentId: agent.id,
      fromNumber: msgapp.number,
      phoneNumberId: msgapp.phone_number_id,
      credentialId: msgapp.credential_id,
      to: body.to,
      customerId: body.customer_id ?? null,
      content,
      kind: content.kind,
      text: content.kind === 'text' ? content.text : content.kind === 'image' || content.kind === 'video' || content.kind === 'document' ? (content.caption ?? null) : null,
      templateName: content.kind === 'template' ? content.name : null,
    };
  }

  /**
   * An agent's reply in a msgapp conversation as a send: to the customer whose message it
   * answers, from the agent's number, under the reply's own id (so the send workflow,
   * `message-send:<reply id>`, exists once per reply). The send rules apply as to any send
   * (published, a sender action, a credential, the 24-hour window); a rule that fails is
   * the reason the reply is not sent.
   */
  async planAgentReply(em: EntityManager, reply: { id: string; conversationId: string; replyTo: string | null; text: string }): Promise<SendPlan | { skipped: string }> {
    const text = reply.text.trim();
    if (!text) return { skipped: 'the reply is empty' };
    const answered = reply.replyTo ? await em.findOne(Message, { id: reply.replyTo, conversationId: reply.conversationId, direction: 'inbound' }) : null;
    if (!answered?.agentId) return { skipped: 'the message it answers is not an inbound msgapp message' };
    try {
      const plan = await this.planSend(em, answered.workspaceId, {
        agent_id: answered.agentId,
        to: answered.fromNumber,
        text: text.length > MAX_TEXT_CHARS ? `${text.slice(0, MAX_TEXT_CHARS - 1)}…` : text,
        ...(answered.customerId ? { customer_id: answered.customerId } : {}),
      });
      return { ...plan, messageId: reply.id, source: 'agent', conversationId: reply.conversationId };
    } catch (err) {
      if (err instanceof DomainError) return { skipped: `${err.code}: ${err.message}` };
      throw err;
    }
  }
}
