import { useState } from 'react';
import { DataTable } from '../../components/DataTable';
import { ErrorAlert, Loading } from '../../components/feedback';
import { NotAllowed, Page } from '../../components/Page';
import '../../components/charts.css';
import { when } from '../../lib/format';
import { Link } from '../../lib/router';
import { hasScope, type Session } from '../auth/api';
import { STATUSES, useMessage, useMessages, type Message, type MessageStatus } from './api';

const what = (m: Message) => (m.kind === 'template' ? `Template ${m.template_name ?? ''}`.trim() : m.text ?? m.kind);

/** Messages sent through POST /api/v1/messages, with their delivery status (the contract: "visible in the management console"). */
export function MessagesPage({ session }: { session: Session }) {
  if (!hasScope(session, 'conversations:read')) return <NotAllowed title="Messages" why="Your role does not read messages." />;
  return <Messages />;
}

function Messages() {
  const [status, setStatus] = useState<MessageStatus | null>(null);
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const list = useMessages(status, cursors[cursors.length - 1]);
  const next = list.data?.next_cursor ?? null;
  return (
    <Page title="Messages">
      <p className="lead">Messages your backend sent through the API, newest first, with where each one stands.</p>
      <div className="filters">
        <label htmlFor="message-status">Status</label>
        <select
          id="message-status"
          className="select"
          value={status ?? ''}
          onChange={(e) => {
            setStatus((e.target.value || null) as MessageStatus | null);
            setCursors([null]);
          }}
        >
          <option value="">Any status</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      {list.isPending ? (
        <Loading what="messages" />
      ) : list.isError ? (
        <ErrorAlert error={list.error} />
      ) : list.data.messages.length === 0 ? (
        <p className="empty">{status ? `No ${status} message.` : 'No message sent through the API yet.'}</p>
      ) : (
        <DataTable
          label="Messages"
          rows={list.data.messages}
          rowKey={(m) => m.id}
          columns={[
            { header: 'To', rowHeader: true, className: 'mono', cell: (m) => <Link to={`/messages/${encodeURIComponent(m.id)}`}>{m.to}</Link> },
            { header: 'Message', cell: (m) => what(m) },
            { header: 'Status', cell: (m) => <span className="tag">{m.status}</span> },
            { header: 'Error', cell: (m) => m.error ?? '—' },
            { header: 'Updated', cell: (m) => when(m.updated_at) },
          ]}
        />
      )}
      <nav className="pager" aria-label="Message pages">
        <button type="button" className="button" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Newer
        </button>
        <span className="muted">Page {cursors.length}</span>
        <button type="button" className="button" disabled={!next || list.isPlaceholderData} onClick={() => next && setCursors((c) => [...c, next])}>
          Older
        </button>
      </nav>
    </Page>
  );
}

/** One message: what was sent, to whom, and its status timeline with errors. */
export function MessagePage({ session, id }: { session: Session; id: string }) {
  if (!hasScope(session, 'conversations:read')) return <NotAllowed title="Message" why="Your role does not read messages." />;
  return <MessageDetail id={id} />;
}

function MessageDetail({ id }: { id: string }) {
  const message = useMessage(id);
  return (
    <Page title="Message">
      <p>
        <Link to="/messages">All messages</Link>
      </p>
      {message.isPending ? (
        <Loading what="the message" />
      ) : message.isError ? (
        <ErrorAlert error={message.error} />
      ) : (
        <>
          <dl className="facts card">
            <div className="wide-fact">
              <dt>Message</dt>
              <dd className="mono wrap-anywhere">{message.data.id}</dd>
            </div>
            <div>
              <dt>Status</dt>
              <dd>{message.data.status}</dd>
            </div>
            <div>
              <dt>From</dt>
              <dd className="mono">{message.data.from}</dd>
            </div>
            <div>
              <dt>To</dt>
              <dd className="mono">{message.data.to}</dd>
            </div>
            <div>
              <dt>Kind</dt>
              <dd>{message.data.kind}</dd>
            </div>
            <div className="wide-fact">
              <dt>Content</dt>
              <dd>{what(message.data)}</dd>
            </div>
            {message.data.error ? (
              <div className="wide-fact">
                <dt>Error</dt>
                <dd>{message.data.error}</dd>
              </div>
            ) : null}
            <div>
              <dt>Provider id</dt>
              <dd className="mono wrap-anywhere">{message.data.provider_message_id ?? '—'}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>{when(message.data.created_at)}</dd>
            </div>
          </dl>
          <section className="section" aria-labelledby="timeline-title">
            <h2 id="timeline-title">Status timeline</h2>
            <ol className="timeline">
              {message.data.status_history.map((s, i) => (
                <li key={i}>
                  <strong>{s.status}</strong> <span className="muted">{when(s.at)}</span>
                  {s.error ? <p className="notice">Error: {s.error}</p> : null}
                </li>
              ))}
            </ol>
          </section>
        </>
      )}
    </Page>
  );
}
