import { Readable } from 'node:stream';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Repositories } from '../repositories';
import { Message, MsgappInboundEvent } from '../../db/entities';
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
import type { ChatTranscript } from '../chat/transcript';
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
    private readonly transcript: Pick<ChatTranscript, 'appendIn' | 'get' | 'replaceAttachments'>,
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

  async applyStatus(update: StatusUpdate): Promise<'changed' | 'kept' | 'replayed' | 'unknown'> {
    return this.em.fork().transactional(async (em) => {
      const at = update.timestamp.toISOString();
      // Only the agent that claims the number: an outbound message of any other agent is not this callback's.
      const agent = await this.repos.agents.agentClaimingNumber(em, update.phoneNumberId);
      if (!agent) return 'unknown';
      const m = await em.findOne(
        Message,
        { direction: 'outbound', agentId: agent.id, $or: [{ providerMessageId: update.providerMessageId }, { id: update.clientMessageId ?? '' }] },
        // Only what a status reads (not the message's content): 300 statuses a second at a carrier's full speed.
        { orderBy: { id: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true, fields: ['id', 'workspaceId', 'conversationId', 'status', 'statusHistory', 'error'] },
      );
      if (!m) return 'unknown';
      // The provider re-sends callbacks it thinks were lost: the same status at the same time is recorded once.
      if (m.statusHistory.some((h) => h.status === update.status && h.at === at)) return 'replayed';
      const entry = { status: update.status, at, ...(update.error ? { error: update.error } : {}) };
      // A callback can beat our own record of the provider's acceptance ('sending'): it counts from there.
      const status = m.status as DeliveryStatus;
      const changes = statusSupersedes(status === ('sending' as string) ? null : status, update.status);
      // The row is locked: the history is appended to as read. A kept update leaves updated_at as it was.
      await em.nativeUpdate(
        Message,
        { id: m.id },
        { statusHistory: [...m.statusHistory, entry], ...(changes ? { status: update.status, error: update.error ?? m.error ?? null, updatedAt: new Date() } : {}) },
      );
      if (!changes) return 'kept';
      // A message outlives its conversation (on delete set null): then there is no timeline to add to.
      if (m.conversationId) {
        await this.repos.conversations.addConversationEvent(em, m.conversationId, 'message.status', { message_id: m.id, status: update.status, ...(update.error ? { error: update.error } : {}) });
      }
      await this.repos.webhooks.emitEvent(em, m.workspaceId, 'message.status', {
        message_id: m.id,
        channel: 'msgapp',
        status: update.status,
        conversation_id: m.conversationId ?? null,
        occurred_at: update.timestamp.toISOString(),
        ...(update.error ? { error: update.error } : {}),
      });
      return 'changed';
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
  async accept(msg: InboundMessage): Promise<'accepted' | 'duplicate' | 'no_agent'> {
    return this.em.fork().transactional(async (em) => {
      const agent = await this.repos.agents.agentClaimingNumber(em, msg.phoneNumberId);
      if (!agent) return 'no_agent' as const;
      // A message without media is recorded below under this id: the event names it from its insert.
      const messageId = msg.media ? null : newId('msg');
      const inserted = await em
        .createQueryBuilder(MsgappInboundEvent)
        .insert({ providerMessageId: msg.providerMessageId, workspaceId: agent.workspaceId, agentId: agent.id, message: msg as unknown as Record<string, unknown>, recordedMessageId: messageId })
        .onConflict('providerMessageId')
        .ignore();
      if (!inserted.affectedRows) return 'duplicate' as const;
      if (messageId) {
        const party = await this.partyIn(em, agent.workspaceId, agent.id, msg);
        const recorded = await this.recordIn(em, msg, party, {}, agent.number ?? msg.displayPhoneNumber, messageId);
        // The provider message id was recorded before without an event of its own (never expected): the event names that one.
        if (recorded.outcome === 'duplicate') await em.nativeUpdate(MsgappInboundEvent, { providerMessageId: msg.providerMessageId }, { recordedMessageId: null });
      }
      // raw SQL: pg_notify has no ORM form; in this transaction it is sent at its commit.
      // eslint-disable-next-line no-restricted-syntax
      await em.execute('select pg_notify(?, ?)', [MSGAPP_INBOUND_CHANNEL, msg.providerMessageId]);
      return 'accepted' as const;
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

  async markInboundDispatched(providerMessageId: string): Promise<void> {
    await this.em.fork().nativeUpdate(MsgappInboundEvent, { providerMessageId }, { dispatchedAt: new Date() });
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
    const customerId = await this.repos.customers.customerForPhone(em, workspaceId, msg.from, { name: msg.profileName });
    const conversationId = await this.repos.conversations.openMsgappConversation(em, { workspaceId, customerId, agentId }, { inbound: true });
    return { workspaceId, agentId, customerId, conversationId };
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
    const media = download.media ? [download.media] : undefined;
    const mediaError = download.error;
    const messageId = namedId ?? newId('msg');
    const kind = msg.kind === 'location' ? 'location' : ['image', 'audio', 'video', 'document'].includes(msg.kind) ? msg.kind : msg.kind === 'voice' ? 'audio' : 'text';
    // raw SQL: the conflict target is the partial unique index on (workspace_id, provider_message_id) where
    // provider_message_id is not null; the ORM's onConflict cannot name its predicate.
    // eslint-disable-next-line no-restricted-syntax
    const inserted = await em.execute(
      `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
       values (?, ?, ?, ?, ?, 'inbound', 'customer', 'msgapp', ?, ?, ?, ?, ?::jsonb, 'received', ?)
       on conflict (workspace_id, provider_message_id) where provider_message_id is not null do nothing returning id`,
      [messageId, party.workspaceId, party.conversationId, party.customerId, party.agentId, msg.from, number, kind, msg.text, JSON.stringify({ media, media_error: mediaError, location: msg.location, raw_type: msg.rawType }), msg.providerMessageId],
    );
    if (!inserted.length) return { outcome: 'duplicate' as const, messageId: null };
    // The 24-hour window opens with the customer's message.
    await this.repos.conversations.markInboundReceived(em, party.conversationId);
    if (!namedId) await em.nativeUpdate(MsgappInboundEvent, { providerMessageId: msg.providerMessageId }, { recordedMessageId: messageId });
    await this.repos.conversations.addConversationEvent(em, party.conversationId, 'message.received', { message_id: messageId, kind, text: msg.text });
    // The conversation's transcript (what the agent reads), under the same id; the provider's id dedupes it too.
    await this.transcript.appendIn(em, {
      id: messageId,
      workspaceId: party.workspaceId,
      conversationId: party.conversationId,
      role: 'user',
      clientMessageId: msg.providerMessageId,
      text: transcriptText(msg),
      attachments: media ?? [],
    });
    await this.repos.webhooks.emitEvent(em, party.workspaceId, 'message.inbound', {
      message_id: messageId,
      channel: 'msgapp',
      from: msg.from,
      to: number,
      text: msg.text,
      profile_name: msg.profileName,
      received_at: msg.timestamp.toISOString(),
      ...(media ? { media } : {}),
      ...(mediaError ? { media_error: mediaError } : {}),
      ...(msg.location ? { location: msg.location } : {}),
    });
    return { outcome: 'recorded' as const, messageId };
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
  async handToAgent(actor: Pick<ConversationRuns, 'customerMessage'>, input: { providerMessageId: string; messageId: string; party: InboundParty }): Promise<{ answered: boolean; reason?: string }> {
    const silence = await this.agentSilence(input.party);
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
