import { useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading } from '../../components/feedback';
import { Field, TextArea } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import { Link, navigate } from '../../lib/router';
import { hasScope, type Session } from '../auth/api';
import { PRIORITIES, STATUSES, useRaiseTicket, useReply, useTicket, useTickets, type Priority } from './api';

/** Tickets with the platform's support: raised here, answered there, followed on the ticket's page. */
export function SupportPage({ session }: { session: Session }) {
  if (!hasScope(session, 'support:read')) return <NotAllowed title="Support" why="Your role does not read support tickets." />;
  return <Support canWrite={hasScope(session, 'support:write')} />;
}

function Support({ canWrite }: { canWrite: boolean }) {
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const tickets = useTickets(cursors[cursors.length - 1]);
  const [raising, setRaising] = useState(false);
  const next = tickets.data?.next_cursor ?? null;
  return (
    <Page
      title="Support"
      actions={
        canWrite ? (
          <button type="button" className="button primary" onClick={() => setRaising(true)}>
            Raise a ticket
          </button>
        ) : null
      }
    >
      <p className="lead">Ask the people who run this installation for help; their answers appear on the ticket.</p>
      {tickets.isPending ? (
        <Loading what="tickets" />
      ) : tickets.isError ? (
        <ErrorAlert error={tickets.error} />
      ) : tickets.data.tickets.length === 0 ? (
        <p className="empty">No tickets yet.</p>
      ) : (
        <DataTable
          label="Tickets"
          rows={tickets.data.tickets}
          rowKey={(t) => t.id}
          columns={[
            { header: 'Subject', rowHeader: true, className: 'wrap-anywhere', cell: (t) => <Link to={`/support/${t.id}`}>{t.subject}</Link> },
            { header: 'Priority', cell: (t) => PRIORITIES[t.priority] },
            { header: 'Status', cell: (t) => <span className={t.status === 'waiting_on_customer' ? 'tag danger-tag' : 'tag'}>{STATUSES[t.status]}</span> },
            { header: 'Updated', cell: (t) => when(t.updated_at) },
          ]}
        />
      )}
      <nav className="pager" aria-label="Ticket pages">
        <button type="button" className="button" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Newer
        </button>
        <span className="muted">Page {cursors.length}</span>
        <button type="button" className="button" disabled={!next || tickets.isPlaceholderData} onClick={() => next && setCursors((c) => [...c, next])}>
          Older
        </button>
      </nav>
      {raising ? <RaiseDialog onClose={() => setRaising(false)} /> : null}
    </Page>
  );
}

function RaiseDialog({ onClose }: { onClose: () => void }) {
  const raise = useRaiseTicket();
  const [subject, setSubject] = useState('');
  const [priority, setPriority] = useState<Priority>('normal');
  const [body, setBody] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    raise.mutate({ subject: subject.trim(), priority, body }, { onSuccess: (t) => navigate(`/support/${t.id}`) });
  };
  return (
    <Dialog title="Raise a ticket" onClose={onClose} wide>
      <form className="stack" onSubmit={submit}>
        <Field label="Subject" required maxLength={200} value={subject} onChange={(e) => setSubject(e.target.value)} />
        <div className="field">
          <label htmlFor="ticket-priority">Priority</label>
          <select id="ticket-priority" className="select" value={priority} onChange={(e) => setPriority(e.target.value as Priority)}>
            {(Object.keys(PRIORITIES) as Priority[]).map((p) => (
              <option key={p} value={p}>
                {PRIORITIES[p]}
              </option>
            ))}
          </select>
        </div>
        <TextArea label="What happened" required value={body} onChange={(e) => setBody(e.target.value)} hint="What you saw, since when, and ids (conversation, message, key prefix) that help." />
        <ErrorAlert error={raise.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={raise.isPending}>
            Raise ticket
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** A ticket's thread, oldest first, and a reply (none once closed). */
export function TicketPage({ session, id }: { session: Session; id: string }) {
  if (!hasScope(session, 'support:read')) return <NotAllowed title="Support ticket" why="Your role does not read support tickets." />;
  return <TicketThread id={id} canWrite={hasScope(session, 'support:write')} />;
}

function TicketThread({ id, canWrite }: { id: string; canWrite: boolean }) {
  const ticket = useTicket(id);
  const reply = useReply(id);
  const [body, setBody] = useState('');
  if (ticket.isPending) return <Loading what="the ticket" />;
  if (ticket.isError) {
    return (
      <Page title="Support ticket">
        <ErrorAlert error={ticket.error} />
        <Link to="/support">All tickets</Link>
      </Page>
    );
  }
  const t = ticket.data;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    reply.mutate(body, { onSuccess: () => setBody('') });
  };
  return (
    <Page title={t.subject}>
      <Link to="/support" className="back">
        All tickets
      </Link>
      <p>
        <span className={t.status === 'waiting_on_customer' ? 'tag danger-tag' : 'tag'}>{STATUSES[t.status]}</span> <span className="muted">· {PRIORITIES[t.priority]} priority · raised {when(t.created_at)}</span>
      </p>
      <h2>Thread</h2>
      <ol className="thread" aria-live="polite">
        {t.messages.map((m) => (
          <li key={m.id} className={m.author}>
            <p className="who">
              {m.author === 'operator' ? 'Support' : 'You'} · {when(m.created_at)}
            </p>
            <p className="text">{m.body}</p>
          </li>
        ))}
      </ol>
      {canWrite && t.status !== 'closed' ? (
        <form className="stack reply" onSubmit={submit}>
          <TextArea label="Your reply" required value={body} onChange={(e) => setBody(e.target.value)} />
          <ErrorAlert error={reply.error} />
          <div>
            <button type="submit" className="button primary" disabled={reply.isPending}>
              Send reply
            </button>
          </div>
        </form>
      ) : t.status === 'closed' ? (
        <p className="muted">This ticket is closed: raise a new one to ask again.</p>
      ) : null}
    </Page>
  );
}
