import { useEffect, useRef, useState, type FormEvent } from 'react';
import { ErrorAlert } from '../../components/feedback';
import { Link } from '../../lib/router';
import { useTryAgent, type Agent, type TryTurn } from './api';

interface Exchange {
  asked: string;
  turn: TryTurn;
}

/**
 * "Try it": a side panel (not a dialog: the form stays usable beside it) that runs real turns of the agent, as saved, in a
 * test conversation the API keeps out of the inbox, analytics and billing. What the turn called is listed; tools that act
 * outside (a send, an MCP tool not marked read-only) are recorded and not run.
 */
export function TryPanel({ agent, onClose }: { agent: Agent; onClose: () => void }) {
  const send = useTryAgent(agent.id);
  const [text, setText] = useState('');
  const [log, setLog] = useState<Exchange[]>([]);
  const conversationId = log.at(-1)?.turn.conversation_id;
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const asked = text.trim();
    if (!asked) return;
    send.mutate({ text: asked, ...(conversationId ? { conversation_id: conversationId } : {}) }, { onSuccess: (turn) => (setLog((l) => [...l, { asked, turn }]), setText('')) });
  };
  return (
    <aside id="try-panel" className="try-panel" aria-labelledby="try-heading">
      <div className="row">
        <h2 id="try-heading" ref={heading} tabIndex={-1}>
          Try it
        </h2>
        <button type="button" className="button small" onClick={onClose}>
          Close
        </button>
      </div>
      <p className="hint">A test conversation with the saved agent: not in the inbox, analytics or billing. Tools that act outside are recorded, not run; nothing is sent.</p>
      <ol className="try-log" aria-label="Test conversation" aria-live="polite">
        {log.map((x) => (
          <li key={x.turn.message_id} className="stack-tight">
            <p className="bubble visitor">
              <span className="visually-hidden">You: </span>
              {x.asked}
            </p>
            {x.turn.reply ? (
              <p className="bubble agent">
                <span className="visually-hidden">Agent: </span>
                {x.turn.reply.held ? 'Not answered: a person holds this conversation.' : x.turn.reply.text}
              </p>
            ) : (
              <p className="alert">The agent could not answer: {x.turn.error ?? 'no reason given'}</p>
            )}
            <Sources extras={x.turn.reply?.extras} />
            {x.turn.actions.length ? (
              <ul className="try-actions" aria-label="Tools called">
                {x.turn.actions.map((a, i) => (
                  <li key={i}>
                    <strong>{a.name}</strong> {a.stubbed ? <span className="tag pending-tag">{a.kind === 'sender' ? 'Not sent (test)' : a.kind === 'handoff' ? 'No person asked (test)' : 'Not run (test)'}</span> : <span className="tag">Ran</span>}
                    <pre className="mono wrap-anywhere">{JSON.stringify(a.arguments)}</pre>
                    {a.stubbed ? null : <p className="muted">{a.output}</p>}
                  </li>
                ))}
              </ul>
            ) : null}
          </li>
        ))}
      </ol>
      {conversationId ? (
        <p>
          <Link to={`/conversations/${conversationId}/debug`}>Open this test conversation in the debugger</Link>
        </p>
      ) : null}
      <form className="stack-tight" onSubmit={submit}>
        <label htmlFor="try-message">Message to the agent</label>
        <textarea id="try-message" rows={2} value={text} onChange={(e) => setText(e.target.value)} maxLength={4000} />
        <ErrorAlert error={send.error} />
        <div className="row">
          <button type="submit" className="button primary" disabled={send.isPending || !text.trim()}>
            {send.isPending ? 'Answering…' : 'Send'}
          </button>
          {log.length ? (
            <button type="button" className="button" onClick={() => setLog([])}>
              New test conversation
            </button>
          ) : null}
        </div>
      </form>
    </aside>
  );
}

/** The files the reply cited and the replies it suggested, as the widget would show them. */
function Sources({ extras }: { extras: Record<string, unknown> | undefined }) {
  const cited = Array.isArray(extras?.citations) ? (extras.citations as Array<{ file_id: string; file_name: string; title?: string }>) : [];
  const suggested = Array.isArray(extras?.suggested_actions) ? (extras.suggested_actions as string[]) : [];
  if (!cited.length && !suggested.length) return null;
  return (
    <div className="stack-tight">
      {cited.length ? (
        <p className="muted">
          Sources: {cited.map((c) => (c.title && c.title !== c.file_name ? `${c.title} (${c.file_name})` : c.file_name)).join(', ')}
        </p>
      ) : null}
      {suggested.length ? <p className="muted">Suggested replies: {suggested.join(' · ')}</p> : null}
    </div>
  );
}
