import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { SupportTicket, SupportTicketMessage, type ISupportTicket, type ISupportTicketMessage, type TicketAuthor, type TicketPriority, type TicketStatus } from '../../db/entities';
import { WorkspaceRepository } from '../workspaces/repository';
import { DomainError, notFound } from '../errors';
import { newId } from '../../lib/ids';
import { keysetFind } from '../../db/pagination';

export const MAX_SUBJECT_CHARS = 200;
export const MAX_BODY_CHARS = 20_000;

export interface TicketMessageView {
  id: string;
  author: TicketAuthor;
  body: string;
  created_at: string;
}

export interface TicketView {
  id: string;
  subject: string;
  priority: TicketPriority;
  status: TicketStatus;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
}

export type TicketWithThread = TicketView & { messages: TicketMessageView[] };

const iso = (d: Date | string) => new Date(d).toISOString();

function view(t: ISupportTicket): TicketView {
  return {
    id: t.id,
    subject: t.subject,
    priority: t.priority,
    status: t.status,
    created_at: iso(t.createdAt),
    updated_at: iso(t.updatedAt),
    closed_at: t.closedAt ? iso(t.closedAt) : null,
  };
}

const messageView = (m: ISupportTicketMessage): TicketMessageView => ({ id: m.id, author: m.author, body: m.body, created_at: iso(m.createdAt) });

const ticketClosed = (id: string) =>
  new DomainError('ticket_closed', `Ticket ${id} is closed and takes no more replies; open a new ticket (POST /api/v1/support/tickets)`);

function checkBody(body: string): string {
  if (!body.trim()) throw new DomainError('invalid_request', 'body: must not be empty');
  if (body.length > MAX_BODY_CHARS) throw new DomainError('invalid_request', `body: at most ${MAX_BODY_CHARS} characters`);
  return body;
}

/**
 * Support tickets from a workspace to the platform operator. The workspace raises and
 * replies through the API; the operator lists, replies and closes through the admin CLI.
 * A reply and a close of the same ticket are serialised by a row lock, so a reply never
 * lands on a ticket closed under it.
 *
 * Status: `open` (the operator's turn) → an operator reply → `waiting_on_customer` → a
 * customer reply → `open`; `close` → `closed`, which takes no replies (409 ticket_closed).
 */
export class SupportService {
  constructor(
    private readonly em: EntityManager,
    /** Default: the one repository of workspaces (tests build the service on its own). */
    private readonly workspaces: Pick<WorkspaceRepository, 'workspaceExists'> = new WorkspaceRepository(),
  ) {}

  async create(workspaceId: string, input: { subject: string; body: string; priority?: TicketPriority }): Promise<TicketWithThread> {
    const subject = input.subject.trim();
    if (!subject || subject.length > MAX_SUBJECT_CHARS) throw new DomainError('invalid_request', `subject: 1 to ${MAX_SUBJECT_CHARS} characters`);
    const body = checkBody(input.body);
    const id = newId('tkt');
    await this.em.fork().transactional(async (em) => {
      if (!(await this.workspaces.workspaceExists(em, workspaceId))) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
      await em.insert(SupportTicket, { id, workspaceId, subject, priority: input.priority ?? 'normal', status: 'open' });
      await em.insert(SupportTicketMessage, { id: newId('tkm'), ticketId: id, author: 'customer', body });
    });
    return this.get(workspaceId, id);
  }

  async list(workspaceId: string, q: { status?: TicketStatus; limit: number; cursor?: string }): Promise<{ tickets: TicketView[]; next_cursor: string | null }> {
    const page = await keysetFind(this.em.fork(), SupportTicket, q.status ? { workspaceId, status: q.status } : { workspaceId }, q);
    return { tickets: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<TicketWithThread> {
    const em = this.em.fork();
    const ticket = await em.findOne(SupportTicket, { id, workspaceId });
    if (!ticket) throw notFound('ticket', id);
    return this.withThread(em, ticket);
  }

  /** The workspace's reply: the ticket is the operator's turn again (`open`). */
  reply(workspaceId: string, id: string, body: string): Promise<TicketWithThread> {
    return this.addMessage({ id, workspaceId }, 'customer', checkBody(body));
  }

  // --- the operator's side (admin CLI): every workspace --------------------------------

  async operatorList(q: { status?: TicketStatus; workspaceId?: string; limit: number; cursor?: string }): Promise<{ tickets: Array<TicketView & { workspace_id: string }>; next_cursor: string | null }> {
    const where: Record<string, string> = {};
    if (q.status) where.status = q.status;
    if (q.workspaceId) where.workspaceId = q.workspaceId;
    const page = await keysetFind(this.em.fork(), SupportTicket, where, q);
    return { tickets: page.rows.map((t) => ({ ...view(t), workspace_id: t.workspaceId })), next_cursor: page.next_cursor };
  }

  async operatorGet(id: string): Promise<TicketWithThread & { workspace_id: string }> {
    const em = this.em.fork();
    const ticket = await em.findOne(SupportTicket, { id });
    if (!ticket) throw new DomainError('not_found', `No ticket with id '${id}'`);
    return { ...(await this.withThread(em, ticket)), workspace_id: ticket.workspaceId };
  }

  /** The operator's answer: the ticket waits on the customer. */
  operatorReply(id: string, body: string): Promise<TicketWithThread> {
    return this.addMessage({ id }, 'operator', checkBody(body));
  }

  /** Closes the ticket (closing a closed ticket changes nothing). */
  async close(id: string): Promise<TicketWithThread> {
    return this.em.fork().transactional(async (em) => {
      const ticket = await em.findOne(SupportTicket, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!ticket) throw new DomainError('not_found', `No ticket with id '${id}'`);
      if (ticket.status !== 'closed') {
        const now = new Date();
        await em.nativeUpdate(SupportTicket, { id }, { status: 'closed', closedAt: now, updatedAt: now });
      }
      return this.withThread(em, await em.findOneOrFail(SupportTicket, { id }, { refresh: true }));
    });
  }

  private async addMessage(where: { id: string; workspaceId?: string }, author: TicketAuthor, body: string): Promise<TicketWithThread> {
    return this.em.fork().transactional(async (em) => {
      const ticket = await em.findOne(SupportTicket, where, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!ticket) throw where.workspaceId ? notFound('ticket', where.id) : new DomainError('not_found', `No ticket with id '${where.id}'`);
      if (ticket.status === 'closed') throw ticketClosed(ticket.id);
      await em.insert(SupportTicketMessage, { id: newId('tkm'), ticketId: ticket.id, author, body });
      await em.nativeUpdate(SupportTicket, { id: ticket.id }, { status: author === 'customer' ? 'open' : 'waiting_on_customer', updatedAt: new Date() });
      return this.withThread(em, await em.findOneOrFail(SupportTicket, { id: ticket.id }, { refresh: true }));
    });
  }

  private async withThread(em: EntityManager, ticket: ISupportTicket): Promise<TicketWithThread> {
    const messages = await em.find(SupportTicketMessage, { ticketId: ticket.id }, { orderBy: { createdAt: 'asc', id: 'asc' }, refresh: true });
    return { ...view(ticket), messages: messages.map(messageView) };
  }
}
