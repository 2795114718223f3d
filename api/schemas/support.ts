import { z } from 'zod';
import { TICKET_AUTHORS, TICKET_PRIORITIES, TICKET_STATUSES } from '../../db/entities';
import { MAX_BODY_CHARS, MAX_SUBJECT_CHARS } from '../../domain/support/tickets';
import { Cursor } from './common';
import { nonBlankText, notBlank } from '../../lib/text';

const Timestamp = z.string().meta({ format: 'date-time' });
const Status = z.enum(TICKET_STATUSES).meta({
  description: '`open`: awaiting the operator; `waiting_on_customer`: the operator answered (a reply reopens it); `closed`: takes no more replies',
});
const Body = notBlank(z.string().max(MAX_BODY_CHARS), 'must not be empty').meta({ description: `Plain text, 1 to ${MAX_BODY_CHARS} characters`, example: 'Our agent stopped answering on WhatsApp since 10:00 UTC.' });

export const TicketMessage = z
  .object({
    id: z.string().meta({ example: 'tkm_0a1b2c3d4e5f60718293a4b5' }),
    author: z.enum(TICKET_AUTHORS).meta({ description: '`customer`: your workspace; `operator`: the platform’s support' }),
    body: z.string(),
    created_at: Timestamp,
  })
  .meta({ id: 'SupportTicketMessage' });

const ticketFields = {
  id: z.string().meta({ example: 'tkt_0a1b2c3d4e5f60718293a4b5' }),
  subject: z.string(),
  priority: z.enum(TICKET_PRIORITIES),
  status: Status,
  created_at: Timestamp,
  updated_at: Timestamp,
  closed_at: Timestamp.nullable(),
};

export const TicketSummary = z.object(ticketFields).meta({ id: 'SupportTicketSummary' });
export const Ticket = z
  .object({ ...ticketFields, messages: z.array(TicketMessage).meta({ description: 'The thread, oldest first; the first message is the ticket’s body' }) })
  .meta({ id: 'SupportTicket' });
export const TicketList = z.object({ tickets: z.array(TicketSummary), next_cursor: z.string().nullable() }).meta({ id: 'SupportTicketList' });

export const CreateTicketBody = z
  .object({
    subject: nonBlankText(MAX_SUBJECT_CHARS).meta({ example: 'WhatsApp replies stopped' }),
    body: Body,
    priority: z.enum(TICKET_PRIORITIES).default('normal'),
  })
  .strict();
export const ReplyTicketBody = z.object({ body: Body }).strict();
export const ListTicketsQuery = z.object({
  status: Status.optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});
