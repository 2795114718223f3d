import { useState } from 'react';
import { DataTable } from '../../components/DataTable';
import { ErrorAlert, Loading } from '../../components/feedback';
import { NotAllowed, Page } from '../../components/Page';
import '../../components/charts.css';
import { when } from '../../lib/format';
import { Link } from '../../lib/router';
import { hasScope, managesWorkspace, type Session } from '../auth/api';
import { historyUrl, useRecentConversations, useTurns, type DebugTurn } from './api';

const ms = (n: number) => (n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(2)} s`);

/** The debugger's index: recent conversations to pick one from (the inbox links here too). */
export function DebuggerIndexPage({ session }: { session: Session }) {
  if (!hasScope(session, 'conversations:read')) return <NotAllowed title="Conversation debugger" why="Your role does not read conversations." />;
  return <DebuggerIndex />;
}

function DebuggerIndex() {
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const list = useRecentConversations(cursors[cursors.length - 1]);
  const next = list.data?.next_cursor ?? null;
  return (
    <Page title="Conversation debugger">
      <p className="lead">Pick a conversation to see each of the agent&rsquo;s replies as its workflow recorded them: the passages retrieved, the prompt, the tool calls, the output and where the time went.</p>
      {list.isPending ? (
        <Loading what="conversations" />
      ) : list.isError ? (
        <ErrorAlert error={list.error} />
      ) : list.data.conversations.length === 0 ? (
        <p className="empty">No conversations yet.</p>
      ) : (
        <DataTable
          label="Recent conversations"
          rows={list.data.conversations}
          rowKey={(c) => c.id}
          columns={[
            { header: 'Conversation', rowHeader: true, className: 'mono', cell: (c) => <Link to={`/conversations/${encodeURIComponent(c.id)}/debug`}>{c.id}</Link> },
            { header: 'Channel', cell: (c) => c.channel },
            { header: 'Status', cell: (c) => (c.needs_human ? `${c.status}, needs a person` : c.status) },
            { header: 'Started', cell: (c) => when(c.created_at) },
          ]}
        />
      )}
      <nav className="pager" aria-label="Conversation pages">
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

/** One conversation's turns, from its workflow history. */
export function DebuggerPage({ session, id }: { session: Session; id: string }) {
  if (!hasScope(session, 'conversations:read')) return <NotAllowed title="Conversation debugger" why="Your role does not read conversations." />;
  return <Debugger id={id} canExport={managesWorkspace(session.user.role)} />;
}

function Debugger({ id, canExport }: { id: string; canExport: boolean }) {
  const turns = useTurns(id);
  const workflow = turns.data?.workflow ?? null;
  return (
    <Page
      title="Conversation debugger"
      actions={
        <>
          <button type="button" className="button" onClick={() => void turns.refetch()} disabled={turns.isFetching}>
            Refresh
          </button>
          {canExport && workflow ? (
            <a className="button" href={historyUrl(id)} download>
              Export history
            </a>
          ) : null}
        </>
      }
    >
      <p>
        <Link to="/debugger">All conversations</Link>
      </p>
      {turns.isPending ? (
        <Loading what="the conversation's history" />
      ) : turns.isError ? (
        <ErrorAlert error={turns.error} />
      ) : (
        <>
          <dl className="facts card">
            <div className="wide-fact">
              <dt>Conversation</dt>
              <dd className="mono wrap-anywhere">{turns.data.conversation_id}</dd>
            </div>
            <div className="wide-fact">
              <dt>Workflow</dt>
              <dd className="mono wrap-anywhere">
                {workflow ? (
                  workflow.ui_url ? (
                    <a href={workflow.ui_url} target="_blank" rel="noreferrer">
                      {workflow.id} (open in the Temporal UI)
                    </a>
                  ) : (
                    workflow.id
                  )
                ) : (
                  'Not started: no message yet'
                )}
              </dd>
            </div>
            {workflow ? (
              <>
                <div>
                  <dt>Run</dt>
                  <dd className="mono wrap-anywhere">{workflow.run_id}</dd>
                </div>
                <div>
                  <dt>Run status</dt>
                  <dd>{workflow.status.replace(/_/g, ' ')}</dd>
                </div>
                <div>
                  <dt>Run started</dt>
                  <dd>{when(workflow.started_at)}</dd>
                </div>
              </>
            ) : null}
          </dl>
          <p className="notice">
            {turns.data.unmasked
              ? 'This view shows the model’s output before masking; your view is recorded in the audit log.'
              : 'The model’s output is shown masked; owners and admins see it before masking.'}{' '}
            Keys and tokens in tool calls are redacted. The latest run only: a conversation continued as new keeps older turns in earlier runs.
          </p>
          {turns.data.turns.length === 0 ? <p className="empty">No agent reply recorded in this run.</p> : null}
          {turns.data.turns.map((turn, i) => (
            <Turn key={turn.event_id} turn={turn} n={i + 1} unmasked={turns.data.unmasked} />
          ))}
        </>
      )}
    </Page>
  );
}

function Turn({ turn, n, unmasked }: { turn: DebugTurn; n: number; unmasked: boolean }) {
  const head = `turn-${turn.event_id}`;
  return (
    <section className="section turn card" aria-labelledby={head}>
      <h2 id={head}>
        Reply {n}: {turn.status}
      </h2>
      <dl className="facts">
        <div>
          <dt>Visitor message</dt>
          <dd className="mono wrap-anywhere">{turn.message_id}</dd>
        </div>
        <div>
          <dt>Reply</dt>
          <dd className="mono wrap-anywhere">{turn.reply_id}</dd>
        </div>
        <div>
          <dt>Received</dt>
          <dd>{when(turn.received_at ?? turn.scheduled_at)}</dd>
        </div>
        <div>
          <dt>Model</dt>
          <dd>{turn.model ?? 'the installation’s model'}</dd>
        </div>
        <div>
          <dt>Attempt</dt>
          <dd>{turn.attempt ?? '—'}</dd>
        </div>
      </dl>
      {turn.error ? (
        <p className="notice" role="status">
          Failed: {turn.error}
        </p>
      ) : null}
      {!turn.traced && turn.status === 'answered' ? <p className="hint">This turn was recorded before the debugger: its history holds the reply only.</p> : null}

      <h3>Retrieved passages</h3>
      {turn.passages.length === 0 ? (
        <p className="empty">No passage was retrieved{turn.query ? ` for “${turn.query}”` : ''}.</p>
      ) : (
        <DataTable
          label={`Passages retrieved for reply ${n}`}
          rows={turn.passages.map((p, i) => ({ ...p, n: i + 1 }))}
          rowKey={(p) => `${p.n}`}
          columns={[
            { header: '#', rowHeader: true, cell: (p) => p.n },
            { header: 'File', cell: (p) => (p.title ? `${p.title} (${p.file_name})` : p.file_name) },
            { header: 'Score', cell: (p) => p.score.toFixed(3) },
            { header: 'Text', cell: (p) => p.text },
          ]}
        />
      )}

      <h3>Prompt</h3>
      <details>
        <summary>Instructions, context and history</summary>
        <h4>Instructions</h4>
        <p className="pre">{turn.prompt.instructions || '—'}</p>
        <h4>Context</h4>
        {turn.prompt.context.length ? (
          <ul>
            {turn.prompt.context.map((c) => (
              <li key={c}>{c}</li>
            ))}
          </ul>
        ) : (
          <p className="empty">No passage or attachment.</p>
        )}
        <h4>History</h4>
        {turn.prompt.history.length ? (
          <ol>
            {turn.prompt.history.map((m, i) => (
              <li key={i}>
                <strong>{m.role}:</strong> {m.text}
              </li>
            ))}
          </ol>
        ) : (
          <p className="empty">No earlier message.</p>
        )}
        <h4>Message</h4>
        <p className="pre">{turn.prompt.message || '—'}</p>
      </details>

      <h3>Tool calls</h3>
      {turn.tool_calls.length === 0 ? (
        <p className="empty">No tool call.</p>
      ) : (
        <DataTable
          label={`Tool calls of reply ${n}`}
          rows={turn.tool_calls.map((c, i) => ({ ...c, key: `${i}` }))}
          rowKey={(c) => c.key}
          columns={[
            { header: 'Tool', rowHeader: true, className: 'mono', cell: (c) => c.name },
            { header: 'Round', cell: (c) => c.round },
            { header: 'Arguments', cell: (c) => <code className="wrap-anywhere">{c.arguments}</code> },
            { header: 'Result', cell: (c) => <code className="wrap-anywhere">{c.output}</code> },
            { header: 'Time', cell: (c) => ms(c.ms) },
          ]}
        />
      )}

      <h3>Output</h3>
      <p className="muted">As sent{unmasked ? '' : ' (what your role sees)'}:</p>
      <p className="pre">{turn.output || '—'}</p>
      {turn.output_unmasked !== null ? (
        <>
          <p className="muted">Before masking:</p>
          <p className="pre">{turn.output_unmasked || '—'}</p>
        </>
      ) : null}
      {turn.rounds.length ? (
        <details>
          <summary>The model&rsquo;s rounds ({turn.rounds.length})</summary>
          <ol>
            {turn.rounds.map((r, i) => (
              <li key={i}>
                {ms(r.ms)}, {r.tokens} tokens: <span className="pre">{r.text || '(tool calls only)'}</span>
              </li>
            ))}
          </ol>
        </details>
      ) : null}

      <h3>Latency by step</h3>
      <DataTable
        label={`Latency of reply ${n}`}
        rows={turn.latency.map((l, i) => ({ ...l, key: `${i}` }))}
        rowKey={(l) => l.key}
        columns={[
          { header: 'Step', rowHeader: true, cell: (l) => l.step },
          { header: 'Time', cell: (l) => ms(l.ms) },
          { header: 'Measured', cell: (l) => (l.source === 'event' ? 'between history events' : 'inside the turn') },
        ]}
      />
    </section>
  );
}
