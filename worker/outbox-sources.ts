import type { Client } from '@temporalio/client';
import type { EntityManager } from '@mikro-orm/postgresql';
import { KB_INDEX_OUTBOX_CHANNEL } from '../domain/kb/files';
import { KnowledgeBaseRepository } from '../domain/kb/repository';
import { MSGAPP_INBOUND_CHANNEL, type InboundItem, type ProviderEventService } from '../domain/messaging/provider-events';
import type { ConversationRuns } from '../domain/ports/workflow-runs';
import type { Logger } from 'pino';
import type { DeliveryService } from '../domain/webhooks/deliveries';
import { kbIndexWorkflow, msgappInboundWorkflow } from '../workflows';
import { indexWorkflowId } from '../workflows/kb-index';
import { msgappInboundWorkflowId } from '../workflows/msgapp-inbound';
import { startsWorkflows, type OutboxSource } from './outbox-dispatcher';
import { WebhookOutbox, type WebhookOutboxSettings } from './webhook-outbox';
import { searchAttributesFor } from '../app/temporal-clients/search-attributes';

export { deliveryWorkflowId } from '../workflows/webhook-delivery';
export { indexWorkflowId } from '../workflows/kb-index';

/** Webhook deliveries: the first attempt from the dispatcher, a retry workflow only for those that fail it (worker/webhook-outbox.ts). */
export function webhookDeliveries(deliveries: DeliveryService, client: Client, s: WebhookOutboxSettings, log?: Pick<Logger, 'warn' | 'error'>): OutboxSource {
  return new WebhookOutbox(deliveries, client, s, log);
}

interface IndexItem {
  id: string;
  workspace_id: string;
  /** The file's name: the workflow's summary in the Temporal UI. */
  name: string;
}

/** `eager`: the client shares this process's worker's native connection, so starts can be eager. */
export function kbIndexing(em: EntityManager, client: Client, s: { taskQueue: string; eager?: boolean }): OutboxSource {
  // The knowledge base's repository (stateless): the outbox reads and marks kb_files only through it.
  const kb = new KnowledgeBaseRepository();
  return startsWorkflows<IndexItem>({
    name: 'kb-indexing',
    channel: KB_INDEX_OUTBOX_CHANNEL,
    pending: (limit) => kb.filesToIndex(em.fork(), limit),
    start: async (item) => {
      await client.workflow.start(kbIndexWorkflow, {
        workflowId: indexWorkflowId(item.id),
        taskQueue: s.taskQueue,
        requestEagerStart: s.eager ?? false,
        args: [{ fileId: item.id }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id, fileId: item.id }),
        staticSummary: item.name,
      });
    },
    markDispatched: (items) => kb.markIndexDispatched(em.fork(), items.map((i) => i.id)),
  });
}

/**
 * Inbound msgapp messages the webhook stored: a message it recorded (no media) goes straight to its conversation's
 * actor (`actor`, the agent's turn; its `message.inbound` left with the webhook's transaction), a media message
 * becomes its `msgapp-inbound:<provider message id>` workflow (download, record, read, then the actor). Handing on
 * twice (a crash before the mark) changes nothing: the actor takes a provider message id once, and a workflow id once.
 */
export function msgappInbound(
  events: ProviderEventService,
  client: Client,
  s: { taskQueue: string; eager?: boolean; actor: Pick<ConversationRuns, 'customerMessage'>; log?: Pick<Logger, 'info'> },
): OutboxSource {
  // Whether an agent answers, read once per pass for all its messages (a burst is many messages to one agent).
  let silences = new Map<string, Promise<string | null>>();
  return startsWorkflows<InboundItem>({
    name: 'msgapp-inbound',
    channel: MSGAPP_INBOUND_CHANNEL,
    pending: (limit) => {
      silences = new Map();
      return events.undispatchedInbound(limit);
    },
    start: async (item) => {
      if (item.recorded) {
        const { messageId, party } = item.recorded;
        if (!party) return;
        const memo = silences;
        const key = `${party.workspaceId}/${party.agentId}`;
        if (!memo.has(key)) memo.set(key, events.agentSilence(party));
        const handed = await events.handToAgent(s.actor, { providerMessageId: item.provider_message_id, messageId, party }, memo.get(key));
        if (!handed.answered) s.log?.info({ messageId, conversationId: party.conversationId, reason: handed.reason }, 'inbound message recorded; the agent does not answer it');
        return;
      }
      await client.workflow.start(msgappInboundWorkflow, {
        workflowId: msgappInboundWorkflowId(item.provider_message_id),
        taskQueue: s.taskQueue,
        requestEagerStart: s.eager ?? false,
        args: [{ providerMessageId: item.provider_message_id, media: item.media }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id }),
        // The kind and the sender's last four digits, never the whole number.
        staticSummary: `inbound ${item.kind ?? 'message'} from …${(item.from ?? '').replace(/\D/g, '').slice(-4)}`,
      });
    },
    markDispatched: (items) => events.markInboundDispatched(items.map((i) => i.provider_message_id)),
  });
}
