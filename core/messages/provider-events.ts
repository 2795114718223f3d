import { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../crypto/secret-box';
import { newId } from '../ids';
import type { InboundMessage, MsgappProvider, StatusUpdate } from '../msgapp/provider';
import { statusSupersedes, type DeliveryStatus } from '../msgapp/webhook';
import type { BlobStore } from '../storage/blob-store';
import { signLink } from '../storage/signed-links';
import { emitEvent } from '../webhooks/emitter';

const MAX_MEDIA_BYTES = 64 * 1024 * 1024;
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

  /** Records an inbound message (once per provider id) for the agent that claims the number (at most one: a unique index). */
  async receive(msg: InboundMessage): Promise<'recorded' | 'duplicate' | 'no_agent'> {
    const [agent] = await this.em.fork().execute<{ id: string; workspace_id: string; number: string; credential_id: string | null }[]>(
      `select id, workspace_id, spec #>> '{triggers,msgapp,number}' as number, spec #>> '{triggers,msgapp,credential_id}' as credential_id
       from agents where status = 'published' and cardinality(invalid_reasons) = 0 and spec #>> '{triggers,msgapp,phone_number_id}' = ?`,
      [msg.phoneNumberId],
    );
    if (!agent) return 'no_agent';
    const seen = await this.em.fork().execute('select 1 from messages where workspace_id = ? and provider_message_id = ?', [agent.workspace_id, msg.providerMessageId]);
    if (seen.length) return 'duplicate';

    // Media is fetched before the transaction: a slow provider must not hold row locks.
    let media: Array<Record<string, unknown>> | undefined;
    let mediaError: string | undefined;
    if (msg.media) {
      try {
        media = [await this.fetchMedia(agent.workspace_id, agent.credential_id, msg)];
      } catch (err) {
        mediaError = `the attachment could not be downloaded: ${(err as Error).message}`;
      }
    }
    return this.em.fork().transactional(async (em) => {
      const messageId = newId('msg');
      await em.execute(
        `with c as (insert into customers (id, workspace_id, name, phone) select ?, ?, ?, ?
                    where not exists (select 1 from customer_identities where workspace_id = ? and kind = 'phone' and value = ?) returning id)
         insert into customer_identities (workspace_id, kind, value, customer_id) select ?, 'phone', ?, id from c on conflict do nothing`,
        [newId('cus'), agent.workspace_id, msg.profileName, msg.from, agent.workspace_id, msg.from, agent.workspace_id, msg.from],
      );
      const [{ customer_id: customerId }] = await em.execute<{ customer_id: string }[]>(
        `select customer_id from customer_identities where workspace_id = ? and kind = 'phone' and value = ?`,
        [agent.workspace_id, msg.from],
      );
      const [open] = await em.execute<{ id: string }[]>(
        `select id from conversations where workspace_id = ? and customer_id = ? and agent_id = ? and channel = 'msgapp' and status = 'open'
         order by created_at desc limit 1 for update`,
        [agent.workspace_id, customerId, agent.id],
      );
      const conversationId = open?.id ?? newId('conv');
      if (open) await em.execute('update conversations set last_inbound_at = now(), updated_at = now() where id = ?', [conversationId]);
      else {
        await em.execute(`insert into conversations (id, workspace_id, customer_id, agent_id, channel, status, last_inbound_at) values (?, ?, ?, ?, 'msgapp', 'open', now())`, [
          conversationId,
          agent.workspace_id,
          customerId,
          agent.id,
        ]);
      }
      const kind = msg.kind === 'location' ? 'location' : ['image', 'audio', 'video', 'document'].includes(msg.kind) ? msg.kind : msg.kind === 'voice' ? 'audio' : 'text';
      const inserted = await em.execute(
        `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
         values (?, ?, ?, ?, ?, 'inbound', 'customer', 'msgapp', ?, ?, ?, ?, ?::jsonb, 'received', ?)
         on conflict (workspace_id, provider_message_id) where provider_message_id is not null do nothing returning id`,
        [messageId, agent.workspace_id, conversationId, customerId, agent.id, msg.from, agent.number, kind, msg.text, JSON.stringify({ media, media_error: mediaError, location: msg.location, raw_type: msg.rawType }), msg.providerMessageId],
      );
      if (!inserted.length) return 'duplicate' as const;
      await em.execute(`insert into conversation_events (id, conversation_id, type, data) values (?, ?, 'message.received', ?::jsonb)`, [
        newId('evt'),
        conversationId,
        JSON.stringify({ message_id: messageId, kind, text: msg.text }),
      ]);
      await emitEvent(em, agent.workspace_id, 'message.inbound', {
        message_id: messageId,
        channel: 'msgapp',
        from: msg.from,
        to: agent.number,
        text: msg.text,
        profile_name: msg.profileName,
        received_at: msg.timestamp.toISOString(),
        ...(media ? { media } : {}),
        ...(mediaError ? { media_error: mediaError } : {}),
        ...(msg.location ? { location: msg.location } : {}),
      });
      return 'recorded' as const;
    });
  }

  private async fetchMedia(workspaceId: string, credentialId: string | null, msg: InboundMessage): Promise<Record<string, unknown>> {
    if (!this.provider) throw new Error('no msgapp provider is configured');
    if (!credentialId) throw new Error('the number has no credential');
    const [cred] = await this.em.fork().execute<{ id: string; secret_sealed: string }[]>('select id, secret_sealed from credentials where id = ? and workspace_id = ?', [
      credentialId,
      workspaceId,
    ]);
    if (!cred) throw new Error(`credential ${credentialId} does not exist`);
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
