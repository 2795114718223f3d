import type { EntityManager } from '@mikro-orm/postgresql';
import type { AgentSpec } from '../agents/spec';
import type { CustomerService } from '../customers/customers';
import { ApiError } from '../errors';
import { newId } from '../ids';
import { publishRecheck } from '../chat/frames';
import type { AuthLevel, SiteRow, SiteService, UserContext } from './sites';

export interface WidgetInit {
  conversation_id: string;
  customer_id: string;
  auth_level: 'anonymous' | 'self_asserted' | 'verified';
  agent: { id: string; name: string };
  capabilities: { voice_chat: boolean; dial_out: boolean; file_upload: boolean };
  capability_warnings?: string[];
  response_delivery: 'stream' | 'complete';
}

/** Visitor sessions of the widget: who the visitor is, which conversation, what the agent offers. */
export class WidgetSessionService {
  constructor(
    private readonly em: EntityManager,
    private readonly sites: SiteService,
    private readonly customers: CustomerService,
    /** What the deployment has configured: audio and video uploads need a transcriber. */
    private readonly prereqs: { transcriber: boolean } = { transcriber: false },
  ) {}

  /** A web conversation of the site (its workspace and agent), or 404. */
  async conversation(site: SiteRow, conversationId: string): Promise<{ id: string; customer_id: string; status: 'open' | 'closed' }> {
    const [conv] = await this.em
      .fork()
      .execute<{ id: string; customer_id: string; status: 'open' | 'closed' }[]>(
        `select id, customer_id, status from conversations where id = ? and workspace_id = ? and agent_id = ? and channel = 'web'`,
        [conversationId, site.workspace_id, site.agent_id],
      );
    if (!conv) throw new ApiError(404, 'not_found', `No conversation with id '${conversationId}' on this site`);
    return conv;
  }

  /** The site's published agent, or 503 no_workflow_configured. */
  async agentFor(site: SiteRow): Promise<{ id: string; name: string; spec: AgentSpec }> {
    const [agent] = await this.em
      .fork()
      .execute<{ id: string; name: string; status: string; spec: AgentSpec }[]>('select id, name, status, spec from agents where id = ?', [site.agent_id]);
    if (!agent || agent.status !== 'published') throw new ApiError(503, 'no_workflow_configured', 'This site is not bound to a published agent');
    return agent;
  }

  /** The visitor's identity level under the agent's web-chat settings (the spec's 403s). */
  identify(site: SiteRow, spec: AgentSpec, ctx: UserContext | undefined): AuthLevel {
    return this.sites.identify(site, ctx, spec.triggers.web_chat?.require_identity_verification ?? false);
  }

  /**
   * An identified visitor may only write to a conversation of their own customer; an
   * anonymous visitor holds the conversation id as the capability.
   */
  async assertParticipant(site: SiteRow, conv: { customer_id: string }, level: AuthLevel, ctx: UserContext | undefined): Promise<void> {
    if (level === 'anonymous' || !ctx?.external_id) return;
    const rows = await this.em
      .fork()
      .execute(`select 1 from customer_identities where workspace_id = ? and kind = 'external_id' and value = ? and customer_id = ?`, [
        site.workspace_id,
        ctx.external_id,
        conv.customer_id,
      ]);
    if (!rows.length) throw new ApiError(403, 'forbidden', 'This conversation belongs to another visitor');
  }

  /** A verified visitor's conversations on this site's agent, newest first; everyone else: none. */
  async conversations(
    site: SiteRow,
    q: { external_id?: string; phone?: string; email?: string; user_hash?: string; limit: number },
  ): Promise<Array<{ conversation_id: string; title: string; preview: string; updated_at: string }>> {
    const [kind, value] = q.external_id ? (['external_id', q.external_id] as const) : q.phone ? (['phone', q.phone] as const) : q.email ? (['email', q.email] as const) : [null, null];
    if (!kind || !q.user_hash) return [];
    let level: AuthLevel;
    try {
      level = this.sites.identify(site, { external_id: value, user_hash: q.user_hash }, false);
    } catch {
      return [];
    }
    if (level !== 'verified') return [];
    const rows = await this.em.fork().execute<Array<{ id: string; title: string | null; preview: string | null; updated_at: Date }>>(
      `select c.id, c.title, c.updated_at,
              (select m.text from chat_messages m where m.conversation_id = c.id and m.role <> 'tool' order by m.created_at desc limit 1) as preview
       from conversations c
       join customer_identities i on i.customer_id = c.customer_id and i.workspace_id = c.workspace_id
       where c.workspace_id = ? and c.agent_id = ? and c.channel = 'web' and i.kind = ? and i.value = ?
       order by c.updated_at desc, c.id desc limit ?`,
      [site.workspace_id, site.agent_id, kind, value, q.limit],
    );
    return rows.map((r) => ({
      conversation_id: r.id,
      title: r.title ?? 'New conversation',
      preview: (r.preview ?? '').slice(0, 140),
      updated_at: new Date(r.updated_at).toISOString(),
    }));
  }

  /**
   * Closes the visitor's open conversation (an identified visitor's open ones on this
   * agent, or the one named) and opens a fresh one for the same customer. Returns the
   * closed ids so the caller can stop their actors and sockets.
   */
  async startNew(site: SiteRow, body: { user_context?: UserContext; conversation_id?: string } | undefined): Promise<{ conversation_id: string; customer_id: string; closed: string[] }> {
    const agent = await this.agentFor(site);
    const ctx = body?.user_context;
    const level = this.identify(site, agent.spec, ctx);
    const result = await this.em.fork().transactional(async (em) => {
      let customerId: string | null = null;
      if (ctx?.external_id && level !== 'anonymous') customerId = (await this.customers.link(site.workspace_id, { external_id: ctx.external_id })).customer.id;
      const toClose = await em.execute<{ id: string; customer_id: string }[]>(
        `select id, customer_id from conversations where workspace_id = ? and agent_id = ? and channel = 'web' and status = 'open'
           and (customer_id = ? or (id = ? and ?))
         for update`,
        [site.workspace_id, site.agent_id, customerId, body?.conversation_id ?? null, !customerId],
      );
      customerId ??= toClose[0]?.customer_id ?? (await this.customers.create(site.workspace_id, {})).id;
      if (toClose.length) {
        await em.execute(`update conversations set status = 'closed', closed_at = now() where id in (${toClose.map(() => '?').join(',')})`, toClose.map((c) => c.id));
      }
      const id = newId('conv');
      await em.execute(`insert into conversations (id, workspace_id, customer_id, agent_id, site_id, channel, status) values (?, ?, ?, ?, ?, 'web', 'open')`, [
        id,
        site.workspace_id,
        customerId,
        site.agent_id,
        site.id,
      ]);
      return { conversation_id: id, customer_id: customerId, closed: toClose.map((c) => c.id) };
    });
    // Sockets of the closed conversations lose their authorization (closed with 1008).
    for (const id of result.closed) await publishRecheck(this.em, { conversation: id });
    return result;
  }

  async init(site: SiteRow, body: { user_context?: UserContext; conversation_id?: string } | undefined): Promise<WidgetInit> {
    const em = this.em.fork();
    const agent = await this.agentFor(site);
    const web = agent.spec.triggers.web_chat;
    const ctx = body?.user_context;
    const authLevel = this.identify(site, agent.spec, ctx);

    // Known visitors are one customer across sessions; anonymous ones resume by conversation id.
    let customerId: string | null = null;
    let conversationId: string | null = null;
    if (body?.conversation_id) {
      const [conv] = await em.execute<{ id: string; customer_id: string }[]>(
        `select id, customer_id from conversations where id = ? and workspace_id = ? and agent_id = ? and channel = 'web' and status = 'open'`,
        [body.conversation_id, site.workspace_id, site.agent_id],
      );
      if (conv) [conversationId, customerId] = [conv.id, conv.customer_id];
    }
    if (!customerId && ctx?.external_id && authLevel !== 'anonymous') {
      customerId = (await this.customers.link(site.workspace_id, { external_id: ctx.external_id })).customer.id;
    }
    if (!customerId) customerId = (await this.customers.create(site.workspace_id, {})).id;
    if (!conversationId) {
      const [open] = await em.execute<{ id: string }[]>(
        `select id from conversations where workspace_id = ? and customer_id = ? and agent_id = ? and channel = 'web' and status = 'open' order by created_at desc limit 1`,
        [site.workspace_id, customerId, site.agent_id],
      );
      conversationId = open?.id ?? newId('conv');
      if (!open) {
        await em.execute(`insert into conversations (id, workspace_id, customer_id, agent_id, site_id, channel, status) values (?, ?, ?, ?, ?, 'web', 'open')`, [
          conversationId,
          site.workspace_id,
          customerId,
          site.agent_id,
          site.id,
        ]);
      }
    }
    // Voice and dial-out are not built yet: a toggle that is on is reported with why it is off.
    // Uploads of documents and images need nothing external; only audio and video need a transcriber.
    const warnings: string[] = [];
    if (web?.voice_chat) warnings.push('voice_chat is enabled but no voice provider is configured');
    if (web?.dial_out) warnings.push('dial_out is enabled but no telephony provider is configured');
    if (web?.file_upload && !this.prereqs.transcriber) warnings.push('file_upload: audio and video files need a transcriber (TRANSCRIBE_BASE_URL); documents and images work');
    return {
      conversation_id: conversationId,
      customer_id: customerId,
      auth_level: authLevel,
      agent: { id: agent.id, name: agent.name },
      capabilities: { voice_chat: false, dial_out: false, file_upload: web?.file_upload ?? false },
      ...(warnings.length ? { capability_warnings: warnings } : {}),
      response_delivery: web?.response_delivery ?? 'stream',
    };
  }
}
