import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p, updatedAt } from './common';

export const TICKET_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
export type TicketPriority = (typeof TICKET_PRIORITIES)[number];
/** open: the operator's turn; waiting_on_customer: the operator answered; closed: final for replies. */
export const TICKET_STATUSES = ['open', 'waiting_on_customer', 'closed'] as const;
export type TicketStatus = (typeof TICKET_STATUSES)[number];
export const TICKET_AUTHORS = ['customer', 'operator'] as const;
export type TicketAuthor = (typeof TICKET_AUTHORS)[number];

/** A support ticket from a workspace to the platform operator. */
export const SupportTicket = defineEntity({
  name: 'SupportTicket',
  tableName: 'support_tickets',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    subject: p.text(),
    priority: p.enum([...TICKET_PRIORITIES]).columnType('text'),
    status: p.enum([...TICKET_STATUSES]).columnType('text'),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
    closedAt: p.datetime().nullable(),
  },
});
export type ISupportTicket = InferEntity<typeof SupportTicket>;

/** One message of a ticket's thread, from the workspace (`customer`) or the operator. */
export const SupportTicketMessage = defineEntity({
  name: 'SupportTicketMessage',
  tableName: 'support_ticket_messages',
  properties: {
    id: p.text().primary(),
    ticketId: p.text(),
    author: p.enum([...TICKET_AUTHORS]).columnType('text'),
    body: p.text(),
    createdAt: createdAtMs(),
  },
});
export type ISupportTicketMessage = InferEntity<typeof SupportTicketMessage>;
