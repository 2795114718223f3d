import { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../crypto/secret-box';
import { newId } from '../ids';
import { OperationalError } from '../failures';
import { ProviderError, type InboundMessage, type MsgappProvider, type StatusUpdate } from '../msgapp/provider';
import { statusSupersedes, type DeliveryStatus } from '../msgapp/webhook';
import type { BlobStore } from '../storage/blob-store';
import { signLink } from '../storage/signed-links';
import { emitEvent } from '../webhooks/emitter';

const MAX_MEDIA_BYTES = 64 * 1024 * 1024;
/** NOTIFYed with every stored inbound message: wakes the worker's relay (worker/outbox-sources.ts). */
export const MSGAPP_INBOUND_CHANNEL = 'concierge_msgapp_inbound_outbox';

/** Who an inbound message is from and where it goes: step 1 of its workflow. */
export interface InboundParty {
  workspaceId: string;
  agentId: string;
  customerId: string;
  conversationId: string;
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
    private readonly box: SecretBox,
    private readonly blobs: BlobStore,
    private readonly provider: MsgappProvider | null,
    /** PUBLIC_BASE_URL: media links in `message.inbound` are absolute. */
    private readonly publicBaseUrl: string,
  ) {}

  async applyStatus(update: StatusUpdate): Promise<'changed' | 'kept' | 'replayed' | 'unknown'> {
    return this.em.fork().transactional(async (em) => {
      const at = update.timestamp.toISOString();
      const [m] = await em.execute<{ id: string; workspace_id: string; status: DeliveryStatus; conversation_id: string | null; replayed: boolean }[]>(
        `select m.id, m.workspace_id, m.status, m.conversation_id, m.status_history @> ?::jsonb as replayed
         from messages m join agents a on a.id = m.agent_id
         where m.direction = 'outbound' and (m.provider_message_id = ? or m.id = ?)
           and a.status = 'published' and cardinality(a.invalid_reasons) = 0 and a.spec #>> '{triggers,msgapp,phone_number_id}' = ?
         order by m.id limit 1 for update of m`,
        [JSON.stringify([{ status: update.status, at }]), update.providerMessageId, update.clientMessageId ?? '', update.phoneNumberId],
      );
      if (!m) return 'unknown';
      // The provider re-sends callbacks it thinks were lost: the same status at the same time is recorded once.
      if (m.replayed) return 'replayed';
      const entry = { status: update.status, at, ...(update.error ? { error: update.error } : {}) };
      // A callback can beat our own record of the provider's acceptance ('sending'): it counts from there.
      const changes = statusSupersedes(m.status === ('sending' as string) ? null : m.status, update.status);
      await em.execute(
        `update messages set status_history = status_history || ?::jsonb${changes ? ', status = ?, error = coalesce(?, error), updated_at = now()' : ''} where id = ?`,
        changes ? [JSON.stringify([entry]), update.status, update.error ?? null, m.id] : [JSON.stringify([entry]), m.id],
      );
      if (!changes) return 'kept';
      // A message outlives its conversation (on delete set null): then there is no timeline to add to.
      if (m.conversation_id) await em.execute(`insert into conversation_events (id, conversation_id, type, data) values (?, ?, 'message.status', ?::jsonb)`, [
        newId('evt'),
        m.conversation_id,
        JSON.stringify({ message_id: m.id, status: update.status, ...(update.error ? { error: update.error } : {}) }),
      ]);
      await emitEvent(em, m.workspace_id, 'message.status', {
        message_id: m.id,
        channel: 'msgapp',
        status: update.status,
        conversation_id: m.conversation_id,
        occurred_at: update.timestamp.toISOString(),
        ...(update.error ? { error: update.error } : {}),
      });
      return 'changed';
    });
  }

  /**
   * The webhook's part of an inbound message: stored once per provider message id for the
   * agent that claims the number (at most one: a unique index), with a NOTIFY that wakes
   * the worker's relay, which starts its `msgapp-inbound:<provider message id>` workflow.
   * Nothing slow happens here: the provider gets its 200 as soon as the row commits.
   */
  async accept(msg: InboundMessage): Promise<'accepted' | 'duplicate' | 'no_agent'> {
    const [agent] = await this.em.fork().execute<{ id: string; workspace_id: string }[]>(
      `select id, workspace_id from agents where status = 'published' and cardinality(invalid_reasons) = 0 and spec #>> '{triggers,msgapp,phone_number_id}' = ?`,
      [msg.phoneNumberId],
    );
    if (!agent) return 'no_agent';
    return this.em.fork().transactional(async (em) => {
      const inserted = await em.execute(
        `insert into msgapp_inbound_events (provider_message_id, workspace_id, agent_id, message) values (?, ?, ?, ?::jsonb)
         on conflict (provider_message_id) do nothing returning provider_message_id`,
        [msg.providerMessageId, agent.workspace_id, agent.id, JSON.stringify(msg)],
      );
      if (!inserted.length) return 'duplicate' as const;
      await em.execute('select pg_notify(?, ?)', [MSGAPP_INBOUND_CHANNEL, msg.providerMessageId]);
      return 'accepted' as const;
    });
  }

  /** Stored inbound messages whose workflow has not been started (the outbox relay's query). */
  /** Stored inbound messages not yet handed to a workflow; `kind` and `from` only label the workflow in the Temporal UI. */
  async undispatchedInbound(limit: number): Promise<Array<{ provider_message_id: string; workspace_id: string; kind: string | null; from: string | null }>> {
    return this.em.fork().execute(
      `select provider_message_id, workspace_id, message->>'kind' as kind, message->>'from' as "from"
       from msgapp_inbound_events where dispatched_at is null order by received_at, provider_message_id limit ?`,
      [limit],
    );
  }

  async markInboundDispatched(providerMessageId: string): Promise<void> {
    await this.em.fork().execute('update msgapp_inbound_events set dispatched_at = now() where provider_message_id = ?', [providerMessageId]);
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
    return this.em.fork().transactional(async (em) => {
      await em.execute(
        `with c as (insert into customers (id, workspace_id, name, phone) select ?, ?, ?, ?
                    where not exists (select 1 from customer_identities where workspace_id = ? and kind = 'phone' and value = ?) returning id)
         insert into customer_identities (workspace_id, kind, value, customer_id) select ?, 'phone', ?, id from c on conflict do nothing`,
        [newId('cus'), workspaceId, msg.profileName, msg.from, workspaceId, msg.from, workspaceId, msg.from],
      );
      const [{ customer_id: customerId }] = await em.execute<{ customer_id: string }[]>(
        `select customer_id from customer_identities where workspace_id = ? and kind = 'phone' and value = ?`,
        [workspaceId, msg.from],
      );
      const [open] = await em.execute<{ id: string }[]>(
        `select id from conversations where workspace_id = ? and customer_id = ? and agent_id = ? and channel = 'msgapp' and status = 'open'
         order by created_at desc limit 1 for update`,
        [workspaceId, customerId, agentId],
      );
      const conversationId = open?.id ?? newId('conv');
      if (!open) {
        await em.execute(`insert into conversations (id, workspace_id, customer_id, agent_id, channel, status, last_inbound_at) values (?, ?, ?, ?, 'msgapp', 'open', now())`, [
          conversationId,
          workspaceId,
          customerId,
          agentId,
        ]);
      }
      return { workspaceId, agentId, customerId, conversationId };
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
    const [agent] = await this.em.fork().execute<{ credential_id: string | null }[]>(
      `select spec #>> '{triggers,msgapp,credential_id}' as credential_id from agents where id = ? and workspace_id = ?`,
      [event.agentId, event.workspaceId],
    );
    try {
      return await this.fetchMedia(event.workspaceId, agent?.credential_id ?? null, event.msg);
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
    const media = download.media ? [download.media] : undefined;
    const mediaError = download.error;
    const [agent] = await this.em.fork().execute<{ number: string }[]>(`select spec #>> '{triggers,msgapp,number}' as number from agents where id = ?`, [party.agentId]);
    const number = agent?.number ?? msg.displayPhoneNumber;
    return this.em.fork().transactional(async (em) => {
      const messageId = newId('msg');
      const kind = msg.kind === 'location' ? 'location' : ['image', 'audio', 'video', 'document'].includes(msg.kind) ? msg.kind : msg.kind === 'voice' ? 'audio' : 'text';
      const inserted = await em.execute(
        `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
         values (?, ?, ?, ?, ?, 'inbound', 'customer', 'msgapp', ?, ?, ?, ?, ?::jsonb, 'received', ?)
         on conflict (workspace_id, provider_message_id) where provider_message_id is not null do nothing returning id`,
        [messageId, party.workspaceId, party.conversationId, party.customerId, party.agentId, msg.from, number, kind, msg.text, JSON.stringify({ media, media_error: mediaError, location: msg.location, raw_type: msg.rawType }), msg.providerMessageId],
      );
      if (!inserted.length) return { outcome: 'duplicate' as const, messageId: null };
      // The 24-hour window opens with the customer's message.
      await em.execute('update conversations set last_inbound_at = now(), updated_at = now() where id = ?', [party.conversationId]);
      await em.execute('update msgapp_inbound_events set recorded_message_id = ? where provider_message_id = ?', [messageId, providerMessageId]);
      await em.execute(`insert into conversation_events (id, conversation_id, type, data) values (?, ?, 'message.received', ?::jsonb)`, [
        newId('evt'),
        party.conversationId,
        JSON.stringify({ message_id: messageId, kind, text: msg.text }),
      ]);
      await emitEvent(em, party.workspaceId, 'message.inbound', {
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
    });
  }

  /** A stored inbound event, its message revived (dates are ISO strings in JSON). */
  private async inboundEvent(providerMessageId: string): Promise<{ msg: InboundMessage; workspaceId: string; agentId: string } | null> {
    const [row] = await this.em.fork().execute<{ message: InboundMessage & { timestamp: string }; workspace_id: string; agent_id: string }[]>(
      'select message, workspace_id, agent_id from msgapp_inbound_events where provider_message_id = ?',
      [providerMessageId],
    );
    if (!row) return null;
    return { msg: { ...row.message, timestamp: new Date(row.message.timestamp) }, workspaceId: row.workspace_id, agentId: row.agent_id };
  }

  private async fetchMedia(workspaceId: string, credentialId: string | null, msg: InboundMessage): Promise<Record<string, unknown>> {
    if (!this.provider) throw new OperationalError('MediaUnavailable', 'no msgapp provider is configured', false);
    if (!credentialId) throw new OperationalError('MediaUnavailable', 'the number has no credential', false);
    const [cred] = await this.em.fork().execute<{ id: string; secret_sealed: string }[]>('select id, secret_sealed from credentials where id = ? and workspace_id = ?', [
      credentialId,
      workspaceId,
    ]);
    if (!cred) throw new OperationalError('MediaUnavailable', `credential ${credentialId} does not exist`, false);
    const got = await this.provider.downloadMedia(msg.media!.mediaId, this.box.open(cred.secret_sealed, cred.id));
    const staged = await this.blobs.stage(Readable.from(got.bytes), MAX_MEDIA_BYTES);
    const sha = await this.blobs.commit(staged);
    const filename = got.filename ?? msg.media!.filename;
    return {
      type: msg.kind === 'voice' ? 'audio' : msg.kind,
      mime_type: got.mimeType,
      url: signLink(this.box, this.publicBaseUrl, { sha256: sha, mime: got.mimeType, name: filename }),
      ...(filename ? { filename } : {}),
      size: got.bytes.length,
      received_at: nowIso(),
    };
  }
}
