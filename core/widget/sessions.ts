import type { EntityManager } from '@mikro-orm/postgresql';
import type { AgentSpec } from '../agents/spec';
import type { CustomerService } from '../customers/customers';
import { ApiError } from '../errors';
import { newId } from '../ids';
import type { SiteRow, SiteService, UserContext } from './sites';

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
  ) {}

  async init(site: SiteRow, body: { user_context?: UserContext; conversation_id?: string } | undefined): Promise<WidgetInit> {
    const em = this.em.fork();
    const [agent] = await em.execute<{ id: string; name: string; status: string; spec: AgentSpec }[]>('select id, name, status, spec from agents where id = ?', [site.agent_id]);
    if (!agent || agent.status !== 'published') throw new ApiError(503, 'no_workflow_configured', 'This site is not bound to a published agent');
    const web = agent.spec.triggers.web_chat;
    const ctx = body?.user_context;
    const authLevel = this.sites.identify(site, ctx, web?.require_identity_verification ?? false);

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
        await em.execute(`insert into conversations (id, workspace_id, customer_id, agent_id, channel, status) values (?, ?, ?, ?, 'web', 'open')`, [
          conversationId,
          site.workspace_id,
          customerId,
          site.agent_id,
        ]);
      }
    }
    // Voice, dial-out and widget uploads are not built yet: a toggle that is on is reported with why it is off.
    const warnings: string[] = [];
    if (web?.voice_chat) warnings.push('voice_chat is enabled but no voice provider is configured');
    if (web?.dial_out) warnings.push('dial_out is enabled but no telephony provider is configured');
    if (web?.file_upload) warnings.push('file_upload is enabled but widget uploads are not available yet');
    return {
      conversation_id: conversationId,
      customer_id: customerId,
      auth_level: authLevel,
      agent: { id: agent.id, name: agent.name },
      capabilities: { voice_chat: false, dial_out: false, file_upload: false },
      ...(warnings.length ? { capability_warnings: warnings } : {}),
      response_delivery: web?.response_delivery ?? 'stream',
    };
  }
}
