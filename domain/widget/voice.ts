import { enforceDialOut, type DialOutLimits } from '../../lib/ratelimit';
import { DomainError } from '../errors';
import type { VoiceTransport } from '../ports/voice';
import { noWorkflowService, type VoiceSessionRuns } from '../ports/workflow-runs';
import type { CallService } from '../voice/calls';
import type { DialOut } from '../voice/dial-out';
import type { VoiceSessionService } from '../voice/sessions';
import type { WidgetSessionService } from './sessions';
import type { SiteRow } from './sites';

type UserContext = Parameters<WidgetSessionService['authorize']>[2];

/** How long the browser's room token is good for joining. */
const TOKEN_TTL_SECONDS = 120;

export interface WidgetVoiceDeps {
  widget: Pick<WidgetSessionService, 'agentFor' | 'authorize' | 'init' | 'voicePrereqs' | 'verifiedPhone'>;
  sessions: Pick<VoiceSessionService, 'reserveSession' | 'setRoom' | 'markEnded' | 'session' | 'control'>;
  calls: Pick<CallService, 'assertDialOutEnabled' | 'destination' | 'assertDialOutPrereqs'>;
  dialOut: Pick<DialOut, 'place'>;
  /** The voice transport (rooms); null in a process without voice parts. */
  transport: () => VoiceTransport | null;
  /** The voice session workflow's client; null in a process without a workflow service. */
  runs: () => VoiceSessionRuns | null;
}

/**
 * The widget's voice endpoints end to end (`/voice/start`, `/voice/inject_text`,
 * `/voice/stop`, `/call`): the agent's toggle (403), what this installation lacks (503),
 * the visitor's conversation and its identity rules (as /send), the session's reservation
 * (429 caps, 402 the first minute paid), its room and its `voice:vs_…` workflow; a dial-out
 * to the visitor's own verified phone, through DialOut.
 */
export class WidgetVoice {
  constructor(private readonly deps: WidgetVoiceDeps) {}

  /**
   * A browser voice session: checked in the contract's order (a named conversation's
   * identity, the toggle, the prerequisites, the conversation open, the workflow service),
   * reserved, its room created and its workflow started; a session that could not start
   * is marked failed, so it holds no slot.
   */
  async start(site: SiteRow, body: { conversation_id?: string; user_context?: UserContext }, clientAddress: string) {
    const { widget } = this.deps;
    const agent = await widget.agentFor(site);
    // A named conversation's identity rules first: an impostor learns nothing, not even the agent's settings.
    const named = body.conversation_id ? await widget.authorize(site, body.conversation_id, body.user_context, agent.spec) : null;
    if (!agent.spec.triggers.web_chat?.voice_chat) throw new DomainError('voice_chat_not_enabled', 'Voice chat is not enabled for this agent (web_chat.voice_chat)');
    const missing = widget.voicePrereqs().voice;
    const transport = this.deps.transport();
    if (missing || !transport) throw new DomainError('voice_chat_prereq_failed', `Voice chat cannot run here: ${missing ?? 'voice is not configured in this process'}`);
    const conv = named ?? (await widget.authorize(site, (await widget.init(site, { user_context: body.user_context })).conversation_id, body.user_context, agent.spec));
    if (conv.status === 'closed') throw new DomainError('conversation_closed', 'This conversation is closed; start a new one with conversations/new');
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    const row = await this.deps.sessions.reserveSession({
      workspaceId: site.workspace_id,
      siteId: site.id,
      conversationId: conv.id,
      agentId: agent.id,
      customerId: conv.customer_id,
      transport: transport.kind,
      // Counted per visitor and per client address (a joining session holds no workspace slot).
      visitorKey: conv.customer_id ?? conv.id,
      clientAddress,
    });
    try {
      const room = await transport.createRoom({ voiceSessionId: row.id, workspaceId: site.workspace_id, identity: conv.customer_id, ttlSeconds: TOKEN_TTL_SECONDS });
      if (room.room_name !== row.roomName || room.transport !== row.transport) await this.deps.sessions.setRoom(row.id, room.room_name, room.transport);
      await runs.start({ voiceSessionId: row.id, workspaceId: site.workspace_id, conversationId: conv.id, siteId: site.id });
      return { ...room, voice_session_id: row.id, voice_mode: 'hands_free' as const, voice_animation_style: 'orb' as const, conversation_id: conv.id };
    } catch (err) {
      await this.deps.sessions.markEnded(row.id, 'failed to start', true);
      throw err;
    }
  }

  /** A text turn pushed into a live session (the agent answers it aloud); 409 voice_session_not_live while it joins or once it ended. */
  async injectText(site: SiteRow, body: { voice_session_id: string; text: string; user_context?: UserContext }): Promise<{ ok: true }> {
    const row = await this.siteSession(site, body.voice_session_id, body.user_context);
    if (row.status !== 'live') throw new DomainError('voice_session_not_live', row.status === 'starting' ? 'The voice session has not connected yet' : 'The voice session has ended');
    await this.deps.sessions.control(row.id, { k: 'inject', text: body.text });
    return { ok: true };
  }

  /** Ends the session; answers once its recordings are saved (an ended session answers the same). */
  async stop(site: SiteRow, body: { voice_session_id: string; user_context?: UserContext }) {
    const row = await this.siteSession(site, body.voice_session_id, body.user_context);
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    return runs.stop(row.id);
  }

  /**
   * A dial-out to the visitor's own verified phone, checked in the contract's order: a
   * named conversation's identity, the agent's toggle, the verified phone and the number's
   * destination, the number being that phone, the prerequisites, the caps (per client
   * address, per visitor, per number: before any row or workflow), the conversation open;
   * then placed (slot and first minute, its `call:call_…` workflow).
   */
  async call(site: SiteRow, body: { phone_number: string; user_context?: UserContext; conversation_id?: string }, clientAddress: string, limits: DialOutLimits) {
    const { widget, calls } = this.deps;
    const agent = await widget.agentFor(site);
    // A named conversation's identity rules come first: an impostor learns nothing, not even the agent's settings.
    const named = body.conversation_id ? await widget.authorize(site, body.conversation_id, body.user_context, agent.spec) : null;
    calls.assertDialOutEnabled(agent.spec);
    // Toll fraud: the widget is anonymous, so it dials only the visitor's own phone, signed by the site's backend.
    const own = widget.verifiedPhone(site, body.user_context);
    const dest = await calls.destination(site.workspace_id, body.phone_number);
    if (dest.phone !== own) {
      throw new DomainError('identity_verification_required', "phone_number: the widget calls only the visitor's own verified phone (user_context.phone, signed by user_hash)");
    }
    await calls.assertDialOutPrereqs(site.workspace_id);
    // Caps before any row or workflow: per client address, per visitor (site and phone), per number across workspaces.
    await enforceDialOut(limits, 'perAddress', clientAddress);
    await enforceDialOut(limits, 'perVisitor', `${site.id}:${own}`);
    await enforceDialOut(limits, 'perDestination', dest.phone);
    const conv = named ?? (await widget.authorize(site, (await widget.init(site, { user_context: body.user_context })).conversation_id, body.user_context, agent.spec));
    if (conv.status === 'closed') throw new DomainError('conversation_closed', 'This conversation is closed; start a new one with conversations/new');
    const row = await this.deps.dialOut.place({
      workspaceId: site.workspace_id,
      siteId: site.id,
      conversationId: conv.id,
      agentId: agent.id,
      phone: dest.phone,
      destinationClass: dest.class,
      creditsPerMinute: dest.creditsPerMinute,
    });
    return { call_id: row.id, status: 'calling' as const, phone: row.phone };
  }

  /** The session of this site (404 otherwise), with the identity rules of its conversation. */
  private async siteSession(site: SiteRow, id: string, ctx: UserContext | undefined) {
    const row = await this.deps.sessions.session(site.workspace_id, id);
    if (!row || row.siteId !== site.id) throw new DomainError('not_found', `No voice session '${id}' on this site`);
    await this.deps.widget.authorize(site, row.conversationId, ctx);
    return row;
  }
}
