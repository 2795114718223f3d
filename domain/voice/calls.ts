import type { EntityManager } from '@mikro-orm/postgresql';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { AgentSpec } from '../agents/spec';
import type { Repositories } from '../repositories';
import type { SecretBox } from '../../lib/crypto/secret-box';
import type { CallStatus, ICall, IRecording } from '../../db/entities';
import { DomainError } from '../errors';
import { decodeCursor, encodeCursor } from '../../db/pagination';
import { signLink } from '../storage/signed-links';
import { checkDestination, type Destination, type DestinationClass } from './destinations';
import type { VoicePrereqs } from '../ports/voice';
import { noWorkflowService, type CallRuns } from '../ports/workflow-runs';
import { recordingView, type RecordingView, type VoiceSessionService } from './sessions';

export interface RecordingWithLink extends RecordingView {
  /** A signed, expiring download link (`/api/media/…`; served as an attachment). */
  url: string;
}

export interface CallView {
  id: string;
  conversation_id: string;
  agent_id: string;
  phone: string;
  direction: 'outbound';
  status: CallStatus;
  status_history: Array<{ status: CallStatus; at: string }>;
  duration_ms: number | null;
  answered_at: string | null;
  ended_at: string | null;
  created_at: string;
  error: string | null;
  answered_by: 'human' | 'machine' | 'unknown' | null;
  recordings: RecordingWithLink[];
}

/** The statuses a call ends in: hanging such a call up changes nothing. */
const ENDED: CallStatus[] = ['completed', 'failed', 'no_answer', 'busy'];
/** How long POST /calls/{id}/hangup waits for the call to end and its recordings to be saved before answering the call as it is. */
const HANGUP_WAIT_MS = 20_000;

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);
const EXTENSIONS: Record<string, string> = { 'audio/ogg': 'ogg', 'audio/wav': 'wav' };

/**
 * A valid number in E.164 (`+15551230000`), or 400 invalid_phone_number. Validity only:
 * a number to dial goes through `checkDestination` (domain/voice/destinations.ts).
 */
export function e164(raw: string): string {
  const parsed = parsePhoneNumberFromString(raw.trim());
  if (!parsed?.isValid()) throw new DomainError('invalid_phone_number', 'phone number: not a valid international number (E.164, e.g. +14155550123)');
  return parsed.format('E.164');
}

/**
 * Dial-out calls and recordings as the API shows them: the checks before a call is
 * placed (the agent's dial_out toggle, the number, what this installation lacks), the
 * call's conversation for POST /outbound, and calls and recordings with signed download
 * links. The rows themselves are VoiceSessionService's.
 */
export class CallService {
  constructor(
    private readonly em: EntityManager,
    private readonly repos: Pick<Repositories, 'conversations' | 'agents' | 'customers' | 'dialOut'>,
    private readonly voice: VoiceSessionService,
    private readonly links: { box: SecretBox; publicBaseUrl: string },
    private readonly prereqs: () => VoicePrereqs | undefined,
    /** Credits a call minute costs by destination class (BILLING_CREDITS_PER_CALL_MINUTE_*); absent: defaultMinuteCredits. */
    private readonly callPrices?: Record<DestinationClass, number>,
    private readonly defaultMinuteCredits = 1,
    /** The calls' workflows (hang-up); null in a process without a workflow service. */
    private readonly runs: () => CallRuns | null = () => null,
    /** Whether the workspace has a SIP trunk of its own (CredentialService.hasSipTrunk): it then needs no installation telephony. */
    private readonly ownTrunk: (workspaceId: string) => Promise<boolean> = async () => false,
  ) {}

  /** The agent's web_chat.dial_out toggle: 403 dial_out_not_enabled when off. */
  assertDialOutEnabled(spec: AgentSpec): void {
    if (!spec.triggers.web_chat?.dial_out) throw new DomainError('dial_out_not_enabled', 'Dial-out is not enabled for this agent (web_chat.dial_out)');
  }

  /**
   * The number under the workspace's destination policy (`checkDestination`: 400
   * invalid_phone_number naming why), with the credits a minute to it costs.
   */
  async destination(workspaceId: string, phoneNumber: string): Promise<Destination & { creditsPerMinute: number }> {
    const dest = checkDestination(phoneNumber, await this.repos.dialOut.dialOutPolicy(this.em, workspaceId));
    return { ...dest, creditsPerMinute: this.callPrices?.[dest.class] ?? this.defaultMinuteCredits };
  }

  /**
   * What this installation lacks for the workspace's dial-out: 503 dial_out_prereq_failed with the
   * reason. A workspace with its own SIP trunk (a telephony credential) needs only the speech.
   */
  async assertDialOutPrereqs(workspaceId: string): Promise<void> {
    const prereqs = this.prereqs();
    let missing = prereqs ? prereqs.dialOut : 'dial-out is not configured in this process';
    if (prereqs && missing && !prereqs.voice && (await this.ownTrunk(workspaceId))) missing = null;
    if (missing) throw new DomainError('dial_out_prereq_failed', `Dial-out cannot run here: ${missing}`);
  }

  /**
   * What every dial-out checks, in the contract's order (docs/contract.md): the agent's web_chat.dial_out
   * toggle (403 dial_out_not_enabled), the number and its destination (400
   * invalid_phone_number), this installation's telephony and speech (503
   * dial_out_prereq_failed). The destination.
   */
  async checkDialOut(workspaceId: string, spec: AgentSpec, phoneNumber: string): Promise<Destination & { creditsPerMinute: number }> {
    this.assertDialOutEnabled(spec);
    const dest = await this.destination(workspaceId, phoneNumber);
    await this.assertDialOutPrereqs(workspaceId);
    return dest;
  }

  /**
   * POST /api/v1/outbound channel voice, before the call is placed: the workspace's
   * published agent (404), the checks above, and the call's conversation: the one named
   * (404 when not in this workspace, 409 when closed), else a new voice conversation
   * with the customer holding that number (created with it when none does). `beforeWork`
   * runs once the number is accepted, before any row is written (the dial-out caps).
   */
  async prepareOutbound(
    workspaceId: string,
    b: { to: string; agent_id: string; conversation_id?: string },
    beforeWork: (dest: Destination) => Promise<void> = async () => undefined,
  ): Promise<{ agentId: string; phone: string; conversationId: string; destinationClass: DestinationClass; creditsPerMinute: number }> {
    const em = this.em.fork();
    const agent = await this.repos.agents.findAgent(em, workspaceId, b.agent_id);
    if (!agent) throw new DomainError('not_found', `No agent with id '${b.agent_id}' in this workspace`);
    if (agent.status !== 'published') throw new DomainError('agent_not_published', `Agent ${agent.id} is a draft; publish it first`, { agent_id: agent.id });
    const dest = await this.checkDialOut(workspaceId, agent.spec, b.to);
    const phone = dest.phone;
    const priced = { destinationClass: dest.class, creditsPerMinute: dest.creditsPerMinute };
    if (b.conversation_id) {
      const conv = await this.repos.conversations.conversationInWorkspace(em, workspaceId, b.conversation_id);
      if (!conv) throw new DomainError('not_found', `No conversation with id '${b.conversation_id}' in this workspace`);
      if (conv.status === 'closed') throw new DomainError('conversation_closed', 'This conversation is closed');
      await beforeWork(dest);
      return { agentId: agent.id, phone, conversationId: conv.id, ...priced };
    }
    await beforeWork(dest);
    const conversationId = await em.transactional(async (tx) => {
      const customerId = await this.repos.customers.customerForPhone(tx, workspaceId, phone);
      return this.repos.conversations.insertVoiceConversation(tx, { workspaceId, agentId: agent.id, customerId });
    });
    return { agentId: agent.id, phone, conversationId, ...priced };
  }

  /** Calls newest first, keyset-paged (`next_cursor`). */
  async list(workspaceId: string, q: { limit: number; cursor?: string }): Promise<{ calls: CallView[]; next_cursor: string | null }> {
    let after: { createdAt: Date; id: string } | undefined;
    if (q.cursor) {
      const [at, id] = decodeCursor(q.cursor);
      after = { createdAt: new Date(at), id };
    }
    const rows = await this.voice.calls(workspaceId, { limit: q.limit + 1, after });
    const page = rows.slice(0, q.limit);
    const calls = await Promise.all(page.map((r) => this.view(r)));
    const last = page[page.length - 1];
    return { calls, next_cursor: rows.length > q.limit ? encodeCursor({ created_at: last.createdAt, id: last.id }) : null };
  }

  async get(workspaceId: string, id: string): Promise<CallView> {
    const row = await this.voice.call(workspaceId, id);
    if (!row) throw new DomainError('not_found', `No call with id '${id}' in this workspace`);
    return this.view(row);
  }

  /**
   * POST /api/v1/calls/{id}/hangup: ends a call that is still calling, ringing or in
   * progress (its workflow hangs up: CANCEL before the answer, BYE after; the recordings are
   * saved) and answers the call once it has ended, or as it is after HANGUP_WAIT_MS.
   * Idempotent, as /voice/stop: an ended call is answered as it is (200), its status unchanged.
   * 404 not_found for another workspace's call; 503 workflow_unavailable without a workflow service.
   */
  async hangUp(workspaceId: string, id: string): Promise<CallView> {
    const row = await this.voice.call(workspaceId, id);
    if (!row) throw new DomainError('not_found', `No call with id '${id}' in this workspace`);
    if (ENDED.includes(row.status)) return this.view(row);
    const runs = this.runs();
    if (!runs) throw noWorkflowService();
    await runs.hangUp(id);
    await runs.ended(id, HANGUP_WAIT_MS);
    return this.get(workspaceId, id);
  }

  /** A conversation's recordings (its browser voice sessions' and calls'), oldest first; 404 when the conversation is not this workspace's. */
  async recordingsOfConversation(workspaceId: string, conversationId: string): Promise<RecordingWithLink[]> {
    if (!(await this.repos.conversations.conversationInWorkspace(this.em.fork(), workspaceId, conversationId))) {
      throw new DomainError('not_found', `No conversation with id '${conversationId}' in this workspace`);
    }
    return (await this.voice.recordingsOfConversation(workspaceId, conversationId)).map((r) => this.withLink(r));
  }

  private async view(r: ICall): Promise<CallView> {
    const recordings = await this.voice.recordingsOf({ callId: r.id });
    return {
      id: r.id,
      conversation_id: r.conversationId,
      agent_id: r.agentId,
      phone: r.phone,
      direction: 'outbound',
      status: r.status,
      status_history: r.statusHistory,
      duration_ms: r.durationMs ?? null,
      answered_at: iso(r.answeredAt),
      ended_at: iso(r.endedAt),
      created_at: iso(r.createdAt)!,
      error: r.error ?? null,
      answered_by: r.answeredBy ?? null,
      recordings: recordings.map((x) => this.withLink(x)),
    };
  }

  /** The recording with a signed link to its bytes: served from the allow-listed audio types, as an attachment. */
  private withLink(r: IRecording): RecordingWithLink {
    const name = `${r.callId ?? r.voiceSessionId}-${r.kind}.${EXTENSIONS[r.mimeType] ?? 'bin'}`;
    return { ...recordingView(r), url: signLink(this.links.box, this.links.publicBaseUrl, { sha256: r.blobSha256, mime: r.mimeType, name }) };
  }
}
