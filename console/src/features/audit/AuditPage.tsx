import { useState } from 'react';
import { DataTable } from '../../components/DataTable';
import { ErrorAlert, Loading } from '../../components/feedback';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import { managesWorkspace, type Session } from '../auth/api';
import { useAuditLog, type AuditEvent } from './api';

export function AuditPage({ session }: { session: Session }) {
  if (!managesWorkspace(session.user.role)) return <NotAllowed title="Audit log" why="Only owners and admins read the audit log." />;
  return <Audit />;
}

/** Every security-relevant act, newest first, a page at a time (the cursors of the pages seen are kept for "Newer"). */
function Audit() {
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const [action, setAction] = useState('');
  const cursor = cursors[cursors.length - 1];
  const log = useAuditLog(cursor, action);
  const next = log.data?.next_cursor ?? null;
  return (
    <Page title="Audit log">
      <p className="lead">Who did what, when and from where: sign-ins, people, keys and settings. The log cannot be changed.</p>
      <form
        className="filters"
        onSubmit={(event) => {
          event.preventDefault();
          const value = new FormData(event.currentTarget).get('action');
          setAction(typeof value === 'string' ? value.trim() : '');
          setCursors([null]);
        }}
      >
        <label htmlFor="audit-action">Action</label>
        <input id="audit-action" name="action" className="input" placeholder="e.g. key.created" defaultValue={action} />
        <button type="submit" className="button">
          Filter
        </button>
      </form>
      {log.isPending ? <Loading what="the audit log" /> : log.isError ? <ErrorAlert error={log.error} /> : <AuditTable events={log.data.events} />}
      <nav className="pager" aria-label="Audit log pages">
        <button type="button" className="button" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Newer
        </button>
        <span className="muted">Page {cursors.length}</span>
        <button type="button" className="button" disabled={!next || log.isPlaceholderData} onClick={() => next && setCursors((c) => [...c, next])}>
          Older
        </button>
      </nav>
    </Page>
  );
}

const ACTORS = { user: 'a person', key: 'an API key', cli: 'the admin CLI', anonymous: 'someone not signed in', system: 'the service' } as const;

function actorOf(event: AuditEvent): string {
  if (event.actor.email) return event.actor.email;
  const who: string = ACTORS[event.actor.type] ?? event.actor.type;
  return event.actor.id ? `${who} (${event.actor.id})` : who;
}

function AuditTable({ events }: { events: AuditEvent[] }) {
  if (events.length === 0) return <p className="empty">Nothing recorded yet.</p>;
  return (
    <DataTable
      label="Audit events"
      rows={events}
      rowKey={(event) => event.id}
      columns={[
        { header: 'When', cell: (event) => when(event.created_at) },
        { header: 'Action', rowHeader: true, className: 'mono', cell: (event) => event.action },
        { header: 'Who', className: 'wrap-anywhere', cell: actorOf },
        { header: 'On what', className: 'wrap-anywhere', cell: (event) => (event.target ? `${event.target.type} ${event.target.id}` : '—') },
        {
          header: 'From',
          cell: (event) => (
            <>
              {event.ip ?? '—'}
              {event.user_agent ? <span className="muted small block">{event.user_agent}</span> : null}
            </>
          ),
        },
      ]}
    />
  );
}
