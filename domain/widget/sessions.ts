import type { VoicePrereqs } from '../ports/voice';
import type { EntityManager } from '@mikro-orm/postgresql';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { AgentSpec } from '../agents/spec';
import type { ChatTranscript } from '../chat/transcript';
import type { WebConversationRow } from '../conversations/repository';
import type { Repositories } from '../repositories';
import type { CustomerService } from '../customers/customers';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { ChatFrames } from '../chat/frames';
import { hashSubject, type AuthLevel, type SiteRow, type SiteService, type UserContext } from './sites';
import type { SiteAppearance } from './appearance';
import type { TeamStatus } from '../team/team';

export interface WidgetInit {
  conversation_id: string;
  customer_id: string;
  auth_level: 'anonymous' | 'self_asserted' | 'verified';
  agent: { id: string; name: string; greeting?: string; starters?: string[] };
  /** Whether a person holds the conversation (the agent does not answer it then). */
  handoff: { active: boolean };
  /** Whether someone of the team is available now: what the widget says while a person holds the conversation. */
  team: TeamStatus;
  capabilities: { voice_chat: boolean; dial_out: boolean; file_upload: boolean };
  capability_warnings?: string[];
  response_delivery: 'stream' | 'complete';
  /** The site's look and language (`site set-appearance`), defaults filled in. */
  appearance: SiteAppearance;
}

/** A web conversation as the widget resolves it. */
export type WebConversation = WebConversationRow;

const requiresVerification = (spec: AgentSpec) => spec.triggers.web_chat?.require_identity_verification ?? false;

/**
 * Identity is a boundary (Intercom's model: an unverified identity is only a label). A
 * conversation started by a verified visitor is read and written only by that same
 * verified identity; one started unverified is reached by its id, the capability handed
 * only to whoever started it. `level` has already passed `identify`: a wrong hash is
 * identity_verification_failed before this runs.
 */
export function assertAccess(conv: Pick<WebConversation, 'verified_external_id'>, ctx: UserContext | undefined, level: AuthLevel): void {
  if (conv.verified_external_id === null) return;
  if (level !== 'verified') {
    throw new DomainError('identity_verification_required', 'This conversation belongs to a verified visitor: send user_context (external_id and user_hash)');
  }
  if (ctx?.external_id !== conv.verified_external_id) throw new DomainError('forbidden', 'This conversation belongs to another visitor');
}

/** Visitor sessions of the widget: who the visitor is, which conversation, what the agent offers. */
export class WidgetSessionService {
  private readonly frames: ChatFrames;

  constructor(
    private readonly em: EntityManager,
    private readonly sites: SiteService,
    private readonly customers: CustomerService,
    private readonly repos: Pick<Repositories, 'conversations' | 'agents' | 'customers'>,
    private readonly transcript: Pick<ChatTranscript, 'latestVisibleTexts'>,
    /** What the deployment has configured: audio and video uploads need a transcriber. */
    private readonly prereqs: {
      transcriber: boolean;
      vision?: boolean;
      voice?: () => VoicePrereqs | undefined;
      /** Whether the workspace can pay a voice minute now: a visitor is never offered a call it would refuse with 402. */
      canPayVoice?: (workspaceId: string) => Promise<boolean>;
      /** Whether the workspace has a SIP trunk of its own (a telephony credential): it dials out without the installation's telephony. */
      ownTrunk?: (workspaceId: string) => Promise<boolean>;
      /** Whether someone of the team is available now (business hours, away): the hand-off status a visitor sees. */
      teamStatus?: (workspaceId: string) => Promise<TeamStatus>;
    } = { transcriber: false },
  ) {
    this.frames = new ChatFrames(em);
  }

  /**
   * A web conversation of this site, or 404. Filtered on the site (not its workspace and
   * agent): another site of the same workspace, even one bound to the same agent, never
   * reaches it, and a suspended site's conversations are reachable from no site.
   */
  async conversation(site: SiteRow, conversationId: string): Promise<WebConversation> {
    const conv = await this.repos.conversations.webConversationOnSite(this.em.fork(), site.id, conversationId);
    if (!conv) throw new DomainError('not_found', `No conversation with id '${conversationId}' on this site`);
    return conv;
  }

  /**
   * The conversation for a caller who names it: 404 when it is not this site's, then the
   * identity rules (`assertAccess`). `spec` spares a query when the caller has the agent.
   */
  async authorize(site: SiteRow, conversationId: string, ctx: UserContext | undefined, spec?: AgentSpec): Promise<WebConversation & { level: AuthLevel }> {
    const level = this.sites.identify(site, ctx, spec ? requiresVerification(spec) : await this.requiresVerification(site));
    const conv = await this.conversation(site, conversationId);
    assertAccess(conv, ctx, level);
    return { ...conv, level };
  }

  /**
   * A visitor leaves an email while nobody of the team is available: stored on the customer as unverified (a label,
   * never an identity) and on the conversation's timeline (`contact_email`), where the team reads it; the team's
   * answer is written into the conversation (POST /api/v1/outbound), where the visitor finds it on return. `conv` has
   * passed `authorize`.
   */
  async leaveContact(site: SiteRow, conv: WebConversation, body: { customer_id?: string; email: string }): Promise<{ stored: true; email: string }> {
    if (body.customer_id && body.customer_id !== conv.customer_id) throw new DomainError('forbidden', 'customer_id does not match the conversation');
    if (conv.status === 'closed') throw new DomainError('conversation_closed', 'This conversation is closed; start a new one with conversations/new');
    const email = body.email.trim().toLowerCase();
    await this.customers.noteUnverifiedEmail(site.workspace_id, conv.customer_id, email);
    await this.repos.conversations.addConversationEvent(this.em.fork(), conv.id, 'contact_email', { email, verified: false });
    return { stored: true, email };
  }

  /**
   * The number a widget visitor may be phoned on: only their own, proved by `user_hash`
   * signing `<site_id>.phone:<E.164>` (toll fraud: an anonymous page must never make us
   * dial a number of its choosing). No phone or no hash, or a phone beside an external_id
   * (the hash is then the external id's, the phone only a label): 403
   * identity_verification_required; a hash that does not sign this phone: 403
   * identity_verification_failed. The phone in E.164.
   */
  verifiedPhone(site: SiteRow, ctx: UserContext | undefined): string {
    if (!ctx?.phone || !ctx.user_hash || ctx.external_id) {
      throw new DomainError(
        'identity_verification_required',
        "user_context: dial-out from the widget calls only the visitor's own verified phone: send user_context {phone, user_hash} (no external_id), user_hash signing <site_id>.phone:<E.164>",
      );
    }
    const parsed = parsePhoneNumberFromString(ctx.phone.trim());
    if (!parsed?.isValid()) throw new DomainError('invalid_phone_number', 'user_context.phone: not a valid international number (E.164, e.g. +14155550123)');
    const phone = parsed.format('E.164');
    if (!this.sites.verifies(site, hashSubject('phone', phone), ctx.user_hash)) {
      throw new DomainError('identity_verification_failed', 'user_hash does not sign <site_id>.phone:<E.164> for user_context.phone under an active or expiring secret of this site');
    }
    return phone;
  }

  /** The identity level of a request that names no conversation (the contract's 403s, docs/contract.md). */
  async identifyOnSite(site: SiteRow, ctx: UserContext | undefined): Promise<AuthLevel> {
    return this.sites.identify(site, ctx, await this.requiresVerification(site));
  }

  private async requiresVerification(site: SiteRow): Promise<boolean> {
    const agent = await this.repos.agents.findAgent(this.em.fork(), site.workspace_id, site.agent_id);
    return agent ? requiresVerification(agent.spec) : false;
  }

  /** Why voice chat and dial-out cannot run in this installation (null: they can). */
  voicePrereqs(): VoicePrereqs {
    return this.prereqs.voice?.() ?? { voice: 'voice is not configured in this process', dialOut: 'dial-out is not configured in this process' };
  }

  /** The site's published agent, or 503 no_workflow_configured. */
  async agentFor(site: SiteRow): Promise<{ id: string; name: string; spec: AgentSpec }> {
    const agent = await this.repos.agents.findAgent(this.em.fork(), site.workspace_id, site.agent_id);
    if (!agent || agent.status !== 'published') throw new DomainError('no_workflow_configured', 'This site is not bound to a published agent');
    return { id: agent.id, name: agent.name, spec: agent.spec };
  }

  /** What the launcher shows before a session: the agent's name, greeting and starters, the site's look. Creates nothing. */
  async publicConfig(site: SiteRow): Promise<{ agent: { name: string; greeting?: string; starters?: string[] }; appearance: SiteAppearance; capabilities: { file_upload: boolean } }> {
    const agent = await this.agentFor(site);
    const web = agent.spec.triggers.web_chat;
    return { agent: agentCard(agent), appearance: site.appearance, capabilities: { file_upload: web?.file_upload ?? false } };
  }

  /** The visitor's identity level under the agent's web-chat settings (the contract's 403s, docs/contract.md). */
  identify(site: SiteRow, spec: AgentSpec, ctx: UserContext | undefined): AuthLevel {
    return this.sites.identify(site, ctx, requiresVerification(spec));
  }

  /**
   * A verified visitor's conversations on this site, newest first; everyone else: none.
   * The hash names the identity kind (`hashSubject`): one signed for an external id never
   * lists the conversations of the customer holding an equal phone or email. Only
   * conversations the caller may then open are listed: those started unverified, and,
   * for an external id, those that very id started verified.
   */
  async conversations(
    site: SiteRow,
    q: { external_id?: string; phone?: string; email?: string; user_hash?: string; limit: number },
  ): Promise<Array<{ conversation_id: string; title: string; preview: string; updated_at: string }>> {
    const [kind, value] = q.external_id ? (['external_id', q.external_id] as const) : q.phone ? (['phone', q.phone] as const) : q.email ? (['email', q.email] as const) : [null, null];
    if (!kind || !q.user_hash || !this.sites.verifies(site, hashSubject(kind, value), q.user_hash)) return [];
    // Identities are stored normalised (emails in lower case; see CustomerService).
    const stored = kind === 'email' ? value.trim().toLowerCase() : value.trim();
    const em = this.em.fork();
    const customerId = await this.repos.customers.customerWithIdentity(em, site.workspace_id, kind, stored);
    const rows = await this.repos.conversations.webConversationsOfCustomers(em, site.id, customerId ? [customerId] : [], kind === 'external_id' ? value : null, q.limit);
    const previews = await this.transcript.latestVisibleTexts(em, rows.map((r) => r.id));
    return rows.map((r) => ({
      conversation_id: r.id,
      title: r.title ?? 'New conversation',
      preview: (previews.get(r.id) ?? '').slice(0, 140),
      updated_at: new Date(r.updated_at).toISOString(),
    }));
  }

  /**
   * Closes the visitor's open conversation and opens a fresh one. A verified visitor's
   * open conversations on this site close; a named conversation closes too, under the
   * identity rules (an impostor naming a verified visitor's conversation gets the 403s).
   * An unverified visitor names the conversation to close: nothing is found by identity.
   * Returns the closed ids so the caller can stop their actors and sockets.
   */
  async startNew(site: SiteRow, body: { user_context?: UserContext; conversation_id?: string } | undefined): Promise<{ conversation_id: string; customer_id: string; closed: string[] }> {
    const agent = await this.agentFor(site);
    const ctx = body?.user_context;
    const level = this.identify(site, agent.spec, ctx);
    const verifiedId = level === 'verified' ? ctx!.external_id! : null;
    const linked = verifiedId ? (await this.customers.link(site.workspace_id, { external_id: verifiedId })).customer.id : null;
    const result = await this.em.fork().transactional(async (em) => {
      const toClose: Array<{ id: string; customer_id: string }> = [];
      if (body?.conversation_id) {
        const named = await this.repos.conversations.webConversationOnSite(em, site.id, body.conversation_id, { lock: true });
        if (named) {
          assertAccess(named, ctx, level);
          if (named.status === 'open') toClose.push(named);
        }
      }
      if (verifiedId) {
        const own = await this.repos.conversations.verifiedOpenWebConversations(em, site.id, verifiedId, { lock: true });
        toClose.push(...own.filter((c) => !toClose.some((t) => t.id === c.id)));
      }
      const customerId = linked ?? toClose[0]?.customer_id ?? (await this.customers.createUnverified(site.workspace_id, { ...ctx })).id;
      await this.repos.conversations.closeConversations(em, toClose.map((c) => c.id));
      const id = newId('conv');
      await this.insertConversation(em, site, id, customerId, verifiedId);
      return { conversation_id: id, customer_id: customerId, closed: toClose.map((c) => c.id) };
    });
    // Sockets of the closed conversations lose their authorization (closed with 1008).
    for (const id of result.closed) await this.frames.recheck({ conversation: id });
    return result;
  }

  /**
   * Opens a session. A verified visitor resumes their own open conversation on this site
   * (one customer across sessions). Anyone resumes the open conversation they name when
   * they may use it (`assertAccess`); one they may not use (another visitor's, on a shared
   * browser) is not resumed and a fresh one starts, so a stale id never fails the widget.
   * An unverified visitor is never resumed by external_id, phone or email: those are only
   * labels on a fresh customer.
   */
  async init(site: SiteRow, body: { user_context?: UserContext; conversation_id?: string } | undefined): Promise<WidgetInit> {
    const em = this.em.fork();
    const agent = await this.agentFor(site);
    const web = agent.spec.triggers.web_chat;
    const ctx = body?.user_context;
    const authLevel = this.identify(site, agent.spec, ctx);
    const verifiedId = authLevel === 'verified' ? ctx!.external_id! : null;

    let conv: { id: string; customer_id: string; needs_human?: boolean } | undefined;
    if (body?.conversation_id) {
      const named = await this.repos.conversations.webConversationOnSite(em, site.id, body.conversation_id, { open: true });
      if (named && (named.verified_external_id === null || named.verified_external_id === verifiedId)) conv = named;
    }
    if (!conv && verifiedId) {
      [conv] = await this.repos.conversations.verifiedOpenWebConversations(em, site.id, verifiedId, { limit: 1 });
    }
    if (!conv) {
      const customerId = verifiedId
        ? (await this.customers.link(site.workspace_id, { external_id: verifiedId })).customer.id
        : (await this.customers.createUnverified(site.workspace_id, { ...ctx })).id;
      conv = { id: newId('conv'), customer_id: customerId };
      await this.insertConversation(em, site, conv.id, customerId, verifiedId);
    }
    // A toggle that is on but cannot work here is reported off, with why.
    // Uploads of documents and images need nothing external; only audio and video need a transcriber.
    const warnings: string[] = [];
    const { voice: voiceMissing, dialOut: installationDialOut } = this.voicePrereqs();
    // A workspace with its own trunk needs only the speech (CallService.assertDialOutPrereqs decides the same).
    const ownTrunk = web?.dial_out && installationDialOut && !voiceMissing && this.prereqs.ownTrunk ? await this.prereqs.ownTrunk(site.workspace_id) : false;
    const dialOutMissing = ownTrunk ? null : installationDialOut;
    if (web?.voice_chat && voiceMissing) warnings.push(`voice_chat is enabled but ${voiceMissing}`);
    if (web?.dial_out && dialOutMissing) warnings.push(`dial_out is enabled but ${dialOutMissing}`);
    if (web?.file_upload && !this.prereqs.transcriber) warnings.push('file_upload: audio and video files need a transcriber (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch); documents and images work');
    if (web?.file_upload && !this.prereqs.vision) warnings.push('file_upload: no vision model (VISION_MODEL): images are read by OCR only and videos by their transcript');
    // Billing is the workspace's business: a visitor is not offered a call the workspace cannot pay (the warning is for the site owner).
    const voicePaid = web?.voice_chat && !voiceMissing && this.prereqs.canPayVoice ? await this.prereqs.canPayVoice(site.workspace_id) : true;
    if (!voicePaid) warnings.push('voice_chat is enabled but the workspace has no credits for a voice minute (admin CLI: credits grant)');
    return {
      conversation_id: conv.id,
      customer_id: conv.customer_id,
      auth_level: authLevel,
      agent: { id: agent.id, ...agentCard(agent) },
      handoff: { active: Boolean(conv.needs_human) },
      team: this.prereqs.teamStatus ? await this.prereqs.teamStatus(site.workspace_id) : ALWAYS_AVAILABLE,
      capabilities: { voice_chat: Boolean(web?.voice_chat && !voiceMissing && voicePaid), dial_out: Boolean(web?.dial_out && !dialOutMissing), file_upload: web?.file_upload ?? false },
      ...(warnings.length ? { capability_warnings: warnings } : {}),
      response_delivery: web?.response_delivery ?? 'stream',
      appearance: site.appearance,
    };
  }

  /** A new open web conversation of the site; `verifiedExternalId` when a verified visitor starts it. */
  private insertConversation(em: EntityManager, site: SiteRow, id: string, customerId: string, verifiedExternalId: string | null): Promise<void> {
    return this.repos.conversations.insertWebConversation(em, { id, workspaceId: site.workspace_id, siteId: site.id, agentId: site.agent_id, customerId, verifiedExternalId });
  }
}

const ALWAYS_AVAILABLE: TeamStatus = { available: true, next_available_at: null, away_message: null, reply_time_minutes: null };

/** The agent as the widget introduces it: name, and the greeting and starter questions when set. */
function agentCard(agent: { name: string; spec: AgentSpec }): { name: string; greeting?: string; starters?: string[] } {
  const web = agent.spec.triggers.web_chat;
  return { name: agent.name, ...(web?.greeting ? { greeting: web.greeting } : {}), ...(web?.starters?.length ? { starters: web.starters } : {}) };
}
