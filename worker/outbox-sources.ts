import type { Client } from '@temporalio/client';
import type { EntityManager } from '@mikro-orm/postgresql';
import { filesToIndex, KB_INDEX_OUTBOX_CHANNEL, markIndexDispatched } from '../core/kb/files';
import { MSGAPP_INBOUND_CHANNEL, type ProviderEventService } from '../core/messages/provider-events';
import type { DeliveryService, DispatchItem } from '../core/webhooks/deliveries';
import { OUTBOX_CHANNEL } from '../core/webhooks/events';
import { kbIndexWorkflow, msgappInboundWorkflow, webhookDeliveryWorkflow } from '../workflows';
import { msgappInboundWorkflowId } from '../workflows/msgapp-inbound';
import type { OutboxSource } from './outbox-dispatcher';
import { searchAttributesFor } from './search-attributes';

export const deliveryWorkflowId = (deliveryId: string) => `webhook-delivery:${deliveryId}`;
export const indexWorkflowId = (fileId: string) => `kb-index:${fileId}`;

export function webhookDeliveries(
  deliveries: DeliveryService,
  client: Client,
  s: { taskQueue: string; backoffMs: number[]; timeoutMs: number },
): OutboxSource<DispatchItem> {
  return {
    name: 'webhook-deliveries',
    channel: OUTBOX_CHANNEL,
    pending: (limit) => deliveries.undispatched(limit),
    start: async (item) => {
      await client.workflow.start(webhookDeliveryWorkflow, {
        workflowId: deliveryWorkflowId(item.id),
        taskQueue: s.taskQueue,
        args: [{ deliveryId: item.id, run: item.run, backoffMs: s.backoffMs, timeoutMs: s.timeoutMs }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id, subscriptionId: item.subscription_id, eventType: item.event_type }),
        staticSummary: `${item.event_type} → ${item.url_host ?? item.subscription_id}`,
        staticDetails: `Delivery ${item.id} (run ${item.run}) of subscription ${item.subscription_id}: up to ${s.backoffMs.length + 1} signed POSTs, ${s.timeoutMs} ms each, waits ${s.backoffMs.join(', ')} ms.`,
      });
    },
    markDispatched: (item) => deliveries.markDispatched(item.id, item.run),
  };
}

interface IndexItem {
  id: string;
  workspace_id: string;
  /** The file's name: the workflow's summary in the Temporal UI. */
  name: string;
}

export function kbIndexing(em: EntityManager, client: Client, s: { taskQueue: string }): OutboxSource<IndexItem> {
  return {
    name: 'kb-indexing',
    channel: KB_INDEX_OUTBOX_CHANNEL,
    pending: (limit) => filesToIndex(em.fork(), limit),
    start: async (item) => {
      await client.workflow.start(kbIndexWorkflow, {
        workflowId: indexWorkflowId(item.id),
        taskQueue: s.taskQueue,
        args: [{ fileId: item.id }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id, fileId: item.id }),
        staticSummary: item.name,
      });
    },
    markDispatched: (item) => markIndexDispatched(em.fork(), item.id),
  };
}

interface InboundItem {
  provider_message_id: string;
  workspace_id: string;
  kind: string | null;
  from: string | null;
}

/** Inbound msgapp messages the webhook stored: one `msgapp-inbound:<provider message id>` workflow each. */
export function msgappInbound(events: ProviderEventService, client: Client, s: { taskQueue: string }): OutboxSource<InboundItem> {
  return {
    name: 'msgapp-inbound',
    channel: MSGAPP_INBOUND_CHANNEL,
    pending: (limit) => events.undispatchedInbound(limit),
    start: async (item) => {
      await client.workflow.start(msgappInboundWorkflow, {
        workflowId: msgappInboundWorkflowId(item.provider_message_id),
        taskQueue: s.taskQueue,
        args: [{ providerMessageId: item.provider_message_id }],
        typedSearchAttributes: searchAttributesFor({ workspaceId: item.workspace_id }),
        // The kind and the sender's last four digits, never the whole number.
        staticSummary: `inbound ${item.kind ?? 'message'} from …${(item.from ?? '').replace(/\D/g, '').slice(-4)}`,
      });
    },
    markDispatched: (item) => events.markInboundDispatched(item.provider_message_id),
  };
}
