import { Readable } from 'node:stream';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Repositories } from '../repositories';
import { Message, MsgappInboundEvent, type StatusChange } from '../../db/entities';
import { ExtractionError, NoTextExtracted, sniffType, TranscriberError } from '../../lib/extract';
import type { ExtractFn } from '../kb/indexing';
import { describeVisual, type ImageDescriber } from '../../lib/visual';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { newId } from '../../lib/ids';
import { OperationalError } from '../../lib/failures';
import { ProviderError, type InboundMessage, type MsgappProvider, type StatusUpdate } from '../ports/msgapp';
import { statusSupersedes, type DeliveryStatus } from '../ports/msgapp';
import type { BlobStore } from '../ports/blob-store';
import { signLink } from '../storage/signed-links';
import { transcriptTitle, type ChatTranscript } from '../chat/transcript';
import type { ConversationRuns } from '../ports/workflow-runs';

const MAX_MEDIA_BYTES = 64 * 1024 * 1024;
/** Characters of a media item's text kept for the agent (as a widget upload's attachment text). */
const MAX_MEDIA_TEXT = 50_000;
/** NOTIFYed with every stored inbound message: wakes the worker's relay (worker/outbox-sources.ts). */
export const MSGAPP_INBOUND_CHANNEL = 'concierge_msgapp_inbound_outbox';

/** An inbound message as its transcript line reads: its text or caption, or what it is. */
function transcriptText(msg: InboundMessage): string {
  if (msg.text) return msg.text;
  if (msg.location) return ['Location:', msg.location.name, msg.location.address, `(${msg.location.latitude}, ${msg.location.longitude})`].filter(Boolean).join(' ');
  return '';
}

/** Who an inbound message is from and where it goes: step 1 of its workflow. */
export interface InboundParty {
  workspaceId: string;
  agentId: string;
  customerId: string;
  conversationId: string;
}
/** A stored inbound message the worker's relay hands on (worker/outbox-sources.ts msgappInbound). */
export interface InboundItem {
  provider_message_id: string;
  workspace_id: string;
  kind: string | null;
  from: string | null;
  media: boolean;
  /** Recorded by the webhook: the message and its party, for the conversation's actor (party null: the conversation is gone). */
  recorded: { messageId: string; party: InboundParty | null } | null;
}
const nowIso = () => new Date().toISOString();

/** What a status update did: moved the message on, kept in its history only, already recorded, or not ours. */
export type StatusOutcome = 'changed' | 'kept' | 'replayed' | 'unknown';
/** What the webhook did with an inbound message: stored it, had it already, or found no agent for its number. */
export type AcceptOutcome = 'accepted' | 'duplicate' | 'no_agent';

/**
 * What the provider tells us (its webhook): delivery statuses of our messages and
 * messages customers send. Statuses only move forward (sent < delivered < read; failed
 * is final): a late or duplicate update is kept in status_history but changes nothing
 * and emits nothing. Each effective change emits `message.status`; each inbound message
 * emits `message.inbound`, whether or not an agent answers it.
 *
 * Both are bound to the number they arrive on (`metadata.phone_number_id`): it belongs to
 * the one published, runnable agent that claimed it (a unique index on agents), and
 * nothing reaches any other agent or workspace — an inbound message for an unclaimed
 * number is dropped, and a status touches only an outbound message of the claiming agent
 * (the Cloud API echoes `biz_opaque_callback_data` as the sender set it, so a status from
 * someone else's number could otherwise name our message id).
 */
export class ProviderEventService {
  constructor(
    private readonly em: EntityManager,
    private readonly repos: Pick<Repositories, 'conversations' | 'agents' | 'customers' | 'credentials' | 'webhooks'>,
    private readonly transcript: Pick<ChatTranscript, 'appendIn' | 'appendManyIn' | 'get' | 'replaceAttachments'>,
    private readonly box: SecretBox,
    private readonly blobs: BlobStore,
    private readonly provider: MsgappProvider | null,
    /** PUBLIC_BASE_URL: media links in `message.inbound` are absolute. */
    private readonly publicBaseUrl: string,
    /** The knowledge base's isolated extractors (and transcriber): the agent reads media as text. */
    private readonly extract: ExtractFn | null = null,
    /** Describes images and video key frames for the agent (VISION_MODEL). */
    private readonly vision: ImageDescriber | null = null,
  ) {}

  async applyStatus(update: StatusUpdate): Promise<StatusOutcome> {
    return (await this.applyStatuses([update]))[0];
  }

  /**
   * Status updates applied in one transaction, in the order given (the msgapp webhook batches those that arrive
   * together: 300 a second at a carrier's full speed), in a handful of statements whatever their number: the
   * claiming agents, the messages locked in id order (two batches never wait on each other in a cycle), their new
   * histories and statuses in one update, the timeline entries in one insert and the `message.status` events in
   * two. Each update as `applyStatus` alone would apply it after the ones before it.
   */
  async applyStatuses(updates: StatusUpdate[]): Promise<StatusOutcome[]> {
    if (!updates.length) return [];
    return this.em.fork().transactional(async (em) => {
      // Only the agent that claims the number: an outbound message of any other agent is not this callback's.
      const agents = new Map<string, string | null>();
      for (const phoneNumberId of new Set(updates.map((u) => u.phoneNumberId))) {
        agents.set(phoneNumberId, (await this.repos.agents.agentClaimingNumber(em, phoneNumberId))?.id ?? null);
      }
      const agentIds = [...new Set([...agents.values()].filter((id): id is string => !!id))];
      if (!agentIds.length) return updates.map(() => 'unknown' as const);
      const providerIds = updates.map((u) => u.providerMessageId);
      const clientIds = updates.map((u) => u.clientMessageId).filter((id): id is string => !!id);
      const rows = await em.find(
        Message,
        { direction: 'outbound', agentId: { $in: agentIds }, $or: [{ providerMessageId: { $in: providerIds } }, ...(clientIds.length ? [{ id: { $in: clientIds } }] : [])] },
        // Only what a status reads (not the message's content); locked in id order.
        { orderBy: { id: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true, fields: ['id', 'workspaceId', 'conversationId', 'agentId', 'providerMessageId', 'status', 'statusHistory', 'error'] },
      );
      type Row = (typeof rows)[number];
      const state = new Map<string, { row: Row; history: StatusChange[]; status: string; error: string | null; changed: boolean }>();
      const timeline: Array<{ conversationId: string; type: string; data: Record<string, unknown> }> = [];
      const events: Array<{ workspaceId: string; type: 'message.status'; data: Record<string, unknown> }> = [];
      const outcomes = updates.map((update): StatusOutcome => {
        const agentId = agents.get(update.phoneNumberId);
        // As one select ordered by id would find it: the lowest id of the agent's message with that provider id or client id.
        const m = rows.find((r) => r.agentId === agentId && (r.providerMessageId === update.providerMessageId || (!!update.clientMessageId && r.id === update.clientMessageId)));
        if (!agentId || !m) return 'unknown';
        const s = state.get(m.id) ?? { row: m, history: [...m.statusHistory], status: m.status, error: m.error ?? null, changed: false };
        state.set(m.id, s);
        const at = update.timestamp.toISOString();
        // The provider re-sends callbacks it thinks were lost: the same status at the same time is recorded once.
        if (s.history.some((h) => h.status === update.status && h.at === at)) return 'replayed';
        s.history.push({ status: update.status, at, ...(update.error ? { error: update.error } : {}) });
        // A callback can beat our own record of the provider's acceptance ('sending'): it counts from there.
        const current = s.status as DeliveryStatus;
        if (!statusSupersedes(current === ('sending' as string) ? null : current, update.status)) return 'kept';
        s.status = update.status;
        s.error = update.error ?? s.error ?? null;
        s.changed = true;
        // A message outlives its conversation (on delete set null): then there is no timeline to add to.
        if (m.conversationId) timeline.push({ conversationId: m.conversationId, type: 'message.status', data: { message_id: m.id, status: update.status, ...(update.error ? { error: update.error } : {}) } });
        events.push({
          workspaceId: m.workspaceId,
          type: 'message.status',
          data: { message_id: m.id, channel: 'msgapp', status: update.status, conversation_id: m.conversationId ?? null, occurred_at: at, ...(update.error ? { error: update.error } : {}) },
        });
        return 'changed';
      });
      const touched = [...state.values()].filter((s) => s.history.length > s.row.statusHistory.length);
      if (touched.length) {
        // raw SQL: one update of many rows, each with its own values (one JSON document); the ORM sends one per row.
        // The rows are locked: the histories are appended to as read. A kept update leaves updated_at as it was.
        // eslint-disable-next-line no-restricted-syntax
        await em.execute(
          `update messages as m set status_history = u.history, status = u.status, error = u.error, updated_at = case when u.changed then now() else m.updated_at end
           from jsonb_to_recordset(?::jsonb) as u (id text, history jsonb, status text, error text, changed boolean) where m.id = u.id`,
          [JSON.stringify(touched.map((s) => ({ id: s.row.id, history: s.history, status: s.status, error: s.error, changed: s.changed })))],
        );
      }
      await this.repos.conversations.addConversationEvents(em, timeline);
      await this.repos.webhooks.emitEvents(em, events);
      return outcomes;
    });
  }

  /**
   * The webhook's part of an inbound message, once per provider message id for the agent
   * that claims the number (at most one: a unique index), in one transaction: the stored
   * event and, for a message without media, the whole record — its customer and
   * conversation (found or created), the message, its conversation event, its transcript
   * line and `message.inbound` — so the subscriber's event does not wait for a workflow
   * (the contract: the subscriber path and the agent path are independent). A media
   * message is recorded by its `msgapp-inbound:<provider message id>` workflow after its
   * download (its event carries the media's links, or `media_error`). Either way a NOTIFY
   * at commit wakes the worker's relay: it hands a recorded message to its conversation's
   * actor (the agent's turn), and starts a media message's workflow. Nothing slow happens
   * here: the provider gets its 200 as soon as the transaction commits.
   */
  async accept(msg: InboundMessage): Promise<AcceptOutcome> {
    return (await this.acceptMany([msg]))[0];
  }

  /**
   * `accept` for the inbound messages that arrive together (the msgapp webhook batches them: 100 a second at a
   * carrier's full speed), in one transaction and a fixed number of statements whatever their number: the claiming
   * agents, the stored events (one insert), the customers and conversations of the text messages (a read and a
   * locked read, inserts for the new ones), their messages, timeline entries, transcript lines and `message.inbound`
   * events (one insert each), one NOTIFY. Answers in the order given; a provider message id given twice is a
   * duplicate the second time.
   */
  async acceptMany(msgs: InboundMessage[]): Promise<AcceptOutcome[]> {
    if (!msgs.length) return [];
    return this.em.fork().transactional(async (em) => {
      const agents = new Map<string, Awaited<ReturnType<typeof this.repos.agents.agentClaimingNumber>>>();
      for (const phoneNumberId of new Set(msgs.map((m) => m.phoneNumberId))) agents.set(phoneNumberId, await this.repos.agents.agentClaimingNumber(em, phoneNumberId));
      const outcomes: AcceptOutcome[] = msgs.map((m) => (agents.get(m.phoneNumberId) ? 'duplicate' : 'no_agent'));
      // The first of each provider message id with an agent; a message without media is recorded below under its id, which the event names from its insert.
      const firsts = new Map<string, { i: number; msg: InboundMessage; agent: NonNullable<ReturnType<typeof agents.get>>; messageId: string | null }>();
      msgs.forEach((msg, i) => {
        const agent = agents.get(msg.phoneNumberId);
        if (agent && !firsts.has(msg.providerMessageId)) firsts.set(msg.providerMessageId, { i, msg, agent, messageId: msg.media ? null : newId('msg') });
      });
      if (!firsts.size) return outcomes;
      // raw SQL: many rows from one JSON document, those inserted read back (the ORM's insert of many does not say which were ignored).
      // eslint-disable-next-line no-restricted-syntax
      const inserted = await em.execute<{ provider_message_id: string }[]>(
        `with stored as (
           insert into msgapp_inbound_events (provider_message_id, workspace_id, agent_id, message, recorded_message_id)
           select provider_message_id, workspace_id, agent_id, message, recorded_message_id
           from jsonb_to_recordset(?::jsonb) as e (provider_message_id text, workspace_id text, agent_id text, message jsonb, recorded_message_id text)
           on conflict (provider_message_id) do nothing
           returning provider_message_id
         )
         -- The relay's wake-up, sent at commit (only when something was stored; identical ones in a transaction are one).
         select provider_message_id, pg_notify(?, 'stored') from stored`,
        [
          JSON.stringify(
            // In key order: two batches that share ids wait on each other in one order only, never in a cycle.
            [...firsts.values()].sort((a, b) => (a.msg.providerMessageId < b.msg.providerMessageId ? -1 : 1)).map((f) => ({ provider_message_id: f.msg.providerMessageId, workspace_id: f.agent.workspaceId, agent_id: f.agent.id, message: f.msg, recorded_message_id: f.messageId })),
          ),
          MSGAPP_INBOUND_CHANNEL,
        ],
      );
      const accepted = inserted.map((r) => firsts.get(r.provider_message_id)!);
      for (const a of accepted) outcomes[a.i] = 'accepted';
      // Messages without media: their customers and conversations, per agent, then their records.
      const texts = accepted.filter((a) => a.messageId);
      const byAgent = new Map<string, typeof texts>();
      for (const t of texts) byAgent.set(t.agent.id, [...(byAgent.get(t.agent.id) ?? []), t]);
      const records: Array<Parameters<ProviderEventService['recordManyIn']>[1][number]> = [];
      for (const group of byAgent.values()) {
        const parties = await this.partiesIn(em, group[0].agent.workspaceId, group[0].agent.id, group.map((t) => t.msg));
        group.forEach((t, k) => records.push({ msg: t.msg, party: parties[k], download: {}, number: t.agent.number ?? t.msg.displayPhoneNumber, namedId: t.messageId! }));
      }
      const recorded = await this.recordManyIn(em, records);
      // A provider message id recorded before without an event of its own (never expected): the event names that one.
      for (const [k, r] of recorded.entries()) {
        if (r.outcome === 'duplicate') await em.nativeUpdate(MsgappInboundEvent, { providerMessageId: records[k].msg.providerMessageId }, { recordedMessageId: null });
      }
      return outcomes;
    });
  }

  /**
   * Stored inbound messages the relay has not handed on: `recorded` when the webhook recorded it (a message without
   * media: it goes to the agent), else its workflow is to start; `kind` and `from` only label the workflow in the
   * Temporal UI, `media` whether it has media to download (its workflow skips the download step when it does not).
   */
  async undispatchedInbound(limit: number): Promise<InboundItem[]> {
    const em = this.em.fork();
    const rows = await em.find(
      MsgappInboundEvent,
      { dispatchedAt: null },
      { fields: ['providerMessageId', 'workspaceId', 'agentId', 'message', 'recordedMessageId'], orderBy: { receivedAt: 'asc', providerMessageId: 'asc' }, limit },
    );
    const recordedIds = rows.map((r) => r.recordedMessageId).filter((id): id is string => !!id);
    const messages = recordedIds.length ? await em.find(Message, { id: { $in: recordedIds } }, { fields: ['id', 'conversationId', 'customerId'] }) : [];
    const byId = new Map(messages.map((m) => [m.id, m]));
    return rows.map((r) => {
      const m = (r.message ?? {}) as { kind?: unknown; from?: unknown; media?: unknown };
      const recorded = r.recordedMessageId ? byId.get(r.recordedMessageId) : undefined;
      return {
        provider_message_id: r.providerMessageId,
        workspace_id: r.workspaceId,
        kind: typeof m.kind === 'string' ? m.kind : null,
        from: typeof m.from === 'string' ? m.from : null,
        media: m.media !== undefined && m.media !== null,
        recorded: r.recordedMessageId
          ? {
              messageId: r.recordedMessageId,
              // A message (or its conversation) deleted since has no actor to go to: nothing to hand on.
              party: recorded?.conversationId ? { workspaceId: r.workspaceId, agentId: r.agentId, customerId: recorded.customerId ?? '', conversationId: recorded.conversationId } : null,
            }
          : null,
      };
    });
  }

  /** The relay handed these on (one provider message id, or a pass's). */
  async markInboundDispatched(providerMessageId: string | string[]): Promise<void> {
    const ids = typeof providerMessageId === 'string' ? [providerMessageId] : providerMessageId;
    if (!ids.length) return;
    await this.em.fork().nativeUpdate(MsgappInboundEvent, { providerMessageId: ids.length === 1 ? ids[0] : { $in: ids } }, { dispatchedAt: new Date() });
  }

  /**
   * Step 1 of an inbound message's workflow: its customer (by phone, in the agent's
   * workspace) and open msgapp conversation with the agent, found or created. Safe to run
   * again: a second run finds what the first created. Null: the stored event is gone.
   */
  async inboundParty(providerMessageId: string): Promise<InboundParty | null> {
    const event = await this.inboundEvent(providerMessageId);
    if (!event) return null;
    const { msg, workspaceId, agentId } = event;
    return this.em.fork().transactional((em) => this.partyIn(em, workspaceId, agentId, msg));
  }

  /** The customer (by phone, in the agent's workspace) and open msgapp conversation with the agent, found or created in `em`'s transaction. */
  private async partyIn(em: EntityManager, workspaceId: string, agentId: string, msg: InboundMessage): Promise<InboundParty> {
    return (await this.partiesIn(em, workspaceId, agentId, [msg]))[0];
  }

  /** `partyIn` for several messages to one agent, in the order given (a customer's messages share its conversation). */
  private async partiesIn(em: EntityManager, workspaceId: string, agentId: string, msgs: InboundMessage[]): Promise<InboundParty[]> {
    const customers = await this.repos.customers.customersForPhones(em, workspaceId, msgs.map((m) => ({ phone: m.from, name: m.profileName })));
    const conversations = await this.repos.conversations.openMsgappConversations(em, { workspaceId, agentId }, [...customers.values()], { inbound: true });
    return msgs.map((m) => {
      const customerId = customers.get(m.from)!;
      return { workspaceId, agentId, customerId, conversationId: conversations.get(customerId)! };
    });
  }

  /**
   * Step 2: the message's media, downloaded with the agent's credential and stored
   * (content-addressed: a repeat stores the same blob once). Null when the message has
   * none. A provider failure says itself whether a retry may help; a missing provider
   * or credential is final.
   */
  async downloadInboundMedia(providerMessageId: string): Promise<Record<string, unknown> | null> {
    const event = await this.inboundEvent(providerMessageId);
    if (!event?.msg.media) return null;
    const agent = await this.repos.agents.findAgent(this.em.fork(), event.workspaceId, event.agentId);
    try {
      return await this.fetchMedia(event.workspaceId, agent?.spec.triggers.msgapp?.credential_id ?? null, event.msg);
    } catch (err) {
      if (err instanceof OperationalError) throw err;
      if (err instanceof ProviderError) throw new OperationalError('MediaDownloadFailed', err.message, err.retryable);
      throw err;
    }
  }

  /**
   * Step 3: the message, its conversation event and `message.inbound`, in one transaction,
   * once per provider message id (a unique index): a repeat records nothing and emits
   * nothing. `media` is step 2's record, or the reason it failed.
   */
  async recordInbound(
    providerMessageId: string,
    party: InboundParty,
    download: { media?: Record<string, unknown>; error?: string },
  ): Promise<{ outcome: 'recorded' | 'duplicate'; messageId: string | null }> {
    const event = await this.inboundEvent(providerMessageId);
    if (!event) return { outcome: 'duplicate', messageId: null };
    const { msg } = event;
    // The event's agent, of the event's workspace (the party's).
    const agent = await this.repos.agents.findAgent(this.em.fork(), party.workspaceId, party.agentId);
    const number = agent?.spec.triggers.msgapp?.number ?? msg.displayPhoneNumber;
    return this.em.fork().transactional((em) => this.recordIn(em, msg, party, download, number));
  }

  /** Step 3 in `em`'s transaction (the webhook's own for a message without media); `number`: the agent's number, the message's `to`. */
  private async recordIn(
    em: EntityManager,
    msg: InboundMessage,
    party: InboundParty,
    download: { media?: Record<string, unknown>; error?: string },
    number: string,
    /** Set: the id the event already names (the webhook's record); else a new one, marked on the event here. */
    namedId?: string,
  ): Promise<{ outcome: 'recorded' | 'duplicate'; messageId: string | null }> {
    return (await this.recordManyIn(em, [{ msg, party, download, number, namedId }]))[0];
  }

  /**
   * `recordIn` for several messages (the webhook's batch), in one statement per table: the messages (those whose
   * provider id is on record already are duplicates), the conversations' windows, the timeline entries, the
   * transcript lines and the `message.inbound` events. Answers in the order given.
   */
  private async recordManyIn(
    em: EntityManager,
    items: Array<{ msg: InboundMessage; party: InboundParty; download: { media?: Record<string, unknown>; error?: string }; number: string; namedId?: string }>,
  ): Promise<Array<{ outcome: 'recorded' | 'duplicate'; messageId: string | null }>> {
    if (!items.length) return [];
    const rows = items.map((it) => {
      const { msg } = it;
      const media = it.download.media ? [it.download.media] : undefined;
      const kind = msg.kind === 'location' ? 'location' : ['image', 'audio', 'video', 'document'].includes(msg.kind) ? msg.kind : msg.kind === 'voice' ? 'audio' : 'text';
      return { ...it, media, mediaError: it.download.error, kind, messageId: it.namedId ?? newId('msg') };
    });
    // raw SQL: the conflict target is the partial unique index on (workspace_id, provider_message_id) where
    // provider_message_id is not null (the ORM's onConflict cannot name its predicate); many rows from one JSON document.
    // eslint-disable-next-line no-restricted-syntax
    const inserted = await em.execute<{ id: string }[]>(
      `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
       select id, workspace_id, conversation_id, customer_id, agent_id, 'inbound', 'customer', 'msgapp', from_number, to_number, kind, text, content, 'received', provider_message_id
       from jsonb_to_recordset(?::jsonb) as m (id text, workspace_id text, conversation_id text, customer_id text, agent_id text, from_number text, to_number text, kind text, text text, content jsonb, provider_message_id text)
       on conflict (workspace_id, provider_message_id) where provider_message_id is not null do nothing returning id`,
      [
        JSON.stringify(
          // In key order (provider message id), as the events' insert.
          [...rows].sort((a, b) => (a.msg.providerMessageId < b.msg.providerMessageId ? -1 : 1)).map((r) => ({
            id: r.messageId,
            workspace_id: r.party.workspaceId,
            conversation_id: r.party.conversationId,
            customer_id: r.party.customerId,
            agent_id: r.party.agentId,
            from_number: r.msg.from,
            to_number: r.number,
            kind: r.kind,
            text: r.msg.text ?? null,
            content: { media: r.media, media_error: r.mediaError, location: r.msg.location, raw_type: r.msg.rawType },
            provider_message_id: r.msg.providerMessageId,
          })),
        ),
      ],
    );
    const stored = new Set(inserted.map((r) => r.id));
    const recorded = rows.filter((r) => stored.has(r.messageId));
    if (recorded.length) {
      // The 24-hour window opens with the customer's message; the conversation is touched (and titled) as its transcript line's.
      const lines = recorded.map((r) => ({
        id: r.messageId,
        workspaceId: r.party.workspaceId,
        conversationId: r.party.conversationId,
        role: 'user' as const,
        clientMessageId: r.msg.providerMessageId,
        text: transcriptText(r.msg),
        attachments: r.media ?? [],
      }));
      const titles = new Map<string, string | null>();
      for (const l of lines) titles.set(l.conversationId, titles.get(l.conversationId) ?? transcriptTitle(l));
      await this.repos.conversations.markInboundReceived(em, [...titles.keys()], titles);
      for (const r of recorded) {
        if (!r.namedId) await em.nativeUpdate(MsgappInboundEvent, { providerMessageId: r.msg.providerMessageId }, { recordedMessageId: r.messageId });
      }
      await this.repos.conversations.addConversationEvents(
        em,
        recorded.map((r) => ({ conversationId: r.party.conversationId, type: 'message.received', data: { message_id: r.messageId, kind: r.kind, text: r.msg.text } })),
      );
      // The conversation's transcript (what the agent reads), under the same id; the provider's id dedupes it too.
      await this.transcript.appendManyIn(em, lines, em, { touch: false });
      await this.repos.webhooks.emitEvents(
        em,
        recorded.map((r) => ({
          workspaceId: r.party.workspaceId,
          type: 'message.inbound' as const,
          data: {
            message_id: r.messageId,
            channel: 'msgapp',
            from: r.msg.from,
            to: r.number,
            text: r.msg.text,
            profile_name: r.msg.profileName,
            received_at: r.msg.timestamp.toISOString(),
            ...(r.media ? { media: r.media } : {}),
            ...(r.mediaError ? { media_error: r.mediaError } : {}),
            ...(r.msg.location ? { location: r.msg.location } : {}),
          },
        })),
      );
    }
    return rows.map((r) => (stored.has(r.messageId) ? { outcome: 'recorded' as const, messageId: r.messageId } : { outcome: 'duplicate' as const, messageId: null }));
  }

  /**
   * Why the number's agent does not answer a customer's message (null: it does): it
   * answers only while published and runnable, with a `sender` action on its canvas (the
   * same rules as any send from its number). The message is recorded and emitted either way.
   */
  async agentSilence(party: InboundParty): Promise<string | null> {
    const agent = await this.repos.agents.findAgent(this.em.fork(), party.workspaceId, party.agentId);
    if (!agent) return 'the agent was deleted';
    if (agent.status !== 'published') return 'the agent is not published';
    if (!agent.spec.actions.some((a) => a.type === 'sender')) return 'the agent has no sender action';
    if (agent.invalidReasons.length) return `the agent cannot run: ${agent.invalidReasons.join('; ')}`;
    return null;
  }

  /**
   * Step 4: a recorded message to its conversation's actor (`actor`), which answers it,
   * unless the number's agent does not answer (then why). The actor takes a provider
   * message id once, so handing the same message on again changes nothing.
   */
  async handToAgent(
    actor: Pick<ConversationRuns, 'customerMessage'>,
    input: { providerMessageId: string; messageId: string; party: InboundParty },
    /** The agent's `agentSilence`, when the caller read it already (the relay: once per pass and agent). */
    silenceRead?: Promise<string | null>,
  ): Promise<{ answered: boolean; reason?: string }> {
    const silence = await (silenceRead ?? this.agentSilence(input.party));
    if (silence) return { answered: false, reason: silence };
    await actor.customerMessage(
      { id: input.party.conversationId, workspaceId: input.party.workspaceId, channel: 'msgapp' },
      { providerMessageId: input.providerMessageId, messageId: input.messageId },
    );
    return { answered: true };
  }

  /**
   * Step 3b: the text of a recorded message's media, for the agent — a document's or
   * image's text, a voice note's or video's transcript — by the knowledge base's
   * isolated extractors, kept on its transcript line (`attachments[].text`). A file with
   * no text keeps an empty text (the agent is told what was attached); a transcriber
   * failure says itself whether a retry may help. Safe to run again: a media item with
   * its text is not read twice.
   */
  async readInboundMedia(messageId: string): Promise<{ chars: number }> {
    const row = await this.transcript.get(messageId);
    const attachments = (row?.attachments ?? []) as Array<Record<string, unknown>>;
    const item = attachments.find((a) => typeof a.sha256 === 'string' && typeof a.text !== 'string');
    if (!row || !item || !this.extract) return { chars: 0 };
    const extract = this.extract;
    const fileName = typeof item.filename === 'string' ? item.filename : `${String(item.type ?? 'media')}`;
    let text = '';
    try {
      text = await this.blobs.withLocalFile(item.sha256 as string, async (filePath) => {
        const type = await sniffType(filePath, fileName);
        if (!type) return '';
        // Media anyone may send to the number: the pool's anonymous lane, in the workspace's turn.
        const read = await extract({ filePath, kind: type.kind, mime: type.mime, fileName, owner: { workspaceId: row.workspace_id, anonymous: true } })
          .then(({ segments }) => segments.map((seg) => seg.text).join('\n\n'))
          .catch((err: unknown) => {
            if (err instanceof NoTextExtracted) return '';
            throw err;
          });
        // A vision model that fails leaves the text alone: the media is still read (OCR, transcript).
        const seen = this.vision ? await describeVisual(filePath, type.kind, type.mime, this.vision).catch(() => '') : '';
        return [seen, read && seen ? `Text in it:\n${read}` : read].filter(Boolean).join('\n\n');
      });
    } catch (err) {
      if (err instanceof TranscriberError && !(err instanceof NoTextExtracted)) throw new OperationalError('TranscriberUnavailable', err.reason, err.retryable && !err.credentialRefused);
      // Nothing readable (a photo, silence, a file we cannot parse) is not a failure: the agent is told what came.
      if (!(err instanceof ExtractionError)) throw err;
    }
    text = text.slice(0, MAX_MEDIA_TEXT);
    await this.transcript.replaceAttachments(messageId, attachments.map((a) => (a === item ? { ...a, text } : a)));
    return { chars: text.length };
  }

  /** A stored inbound event, its message revived (dates are ISO strings in JSON). */
  private async inboundEvent(providerMessageId: string): Promise<{ msg: InboundMessage; workspaceId: string; agentId: string } | null> {
    const row = await this.em.fork().findOne(MsgappInboundEvent, { providerMessageId });
    if (!row) return null;
    const message = row.message as unknown as InboundMessage & { timestamp: string };
    return { msg: { ...message, timestamp: new Date(message.timestamp) }, workspaceId: row.workspaceId, agentId: row.agentId };
  }

  private async fetchMedia(workspaceId: string, credentialId: string | null, msg: InboundMessage): Promise<Record<string, unknown>> {
    if (!this.provider) throw new OperationalError('MediaUnavailable', 'no msgapp provider is configured', false);
    if (!credentialId) throw new OperationalError('MediaUnavailable', 'the number has no credential', false);
    const token = await this.repos.credentials.openMsgappToken(this.em.fork(), this.box, workspaceId, credentialId);
    if (token === null) throw new OperationalError('MediaUnavailable', `credential ${credentialId} does not exist`, false);
    const got = await this.provider.downloadMedia(msg.media!.mediaId, token);
    const staged = await this.blobs.stage(Readable.from(got.bytes), MAX_MEDIA_BYTES);
    const sha = await this.blobs.commit(staged);
    const filename = got.filename ?? msg.media!.filename;
    return {
      type: msg.kind === 'voice' ? 'audio' : msg.kind,
      mime_type: got.mimeType,
      // The bytes' SHA-256, as the Cloud API gives it: their address in our blob store too.
      sha256: sha,
      url: signLink(this.box, this.publicBaseUrl, { sha256: sha, mime: got.mimeType, name: filename }),
      ...(filename ? { filename } : {}),
      size: got.bytes.length,
      received_at: nowIso(),
    };
  }
}
