import { useEffect, useRef, useState, type FormEvent } from 'react';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Dialog } from '../../components/Dialog';
import { Field, TextArea } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import { Link, navigate } from '../../lib/router';
import { hasScope, managesWorkspace, type Session } from '../auth/api';
import {
  CHANNELS,
  STATUSES,
  fillCanned,
  useAct,
  useAgentNames,
  useAttachableFiles,
  useCannedReplies,
  useConversation,
  useCreateCanned,
  useDeleteCanned,
  useInbox,
  useLiveInbox,
  usePresence,
  useSetAutoAssign,
  useSetPresence,
  useTeam,
  useUploadAttachment,
  type InboxConversation,
  type InboxDetail,
  type InboxFilter,
  type InboxStatus,
} from './api';
import './inbox.css';

/**
 * The inbox: every conversation of the workspace across channels, live; one opened beside the list with its
 * transcript as the visitor saw it, notes and recordings; take over, reply, hand back, assign, note and close for
 * those who work conversations (a viewer reads). `/inbox/<id>` opens one; the live stream stays open across both.
 */
export function InboxPage({ session, id }: { session: Session; id?: string }) {
  if (!hasScope(session, 'conversations:read')) return <NotAllowed title="Inbox" why="Your role does not read conversations." />;
  return <Inbox session={session} id={id ?? null} />;
}

function Inbox({ session, id }: { session: Session; id: string | null }) {
  const live = useLiveInbox();
  const [filter, setFilter] = useState<InboxFilter>({ status: 'open' });
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const cursor = cursors[cursors.length - 1];
  const list = useInbox({ ...filter, ...(cursor ? { cursor } : {}) });
  const [notifications, setNotifications] = useState(() => (typeof Notification === 'undefined' ? 'unsupported' : Notification.permission));
  const canWork = session.user.role !== 'viewer';
  const { markRead, unread } = live;
  // The open conversation is read, also when it changes while open.
  useEffect(() => {
    if (id) markRead(id);
  }, [id, unread, markRead]);
  const next = list.data?.next_cursor ?? null;
  return (
    <Page
      title="Inbox"
      actions={
        <>
          <span className={live.connected ? 'tag' : 'tag danger-tag'} role="status">
            {live.connected ? 'Live' : 'Connecting…'}
          </span>
          {notifications === 'default' ? (
            <button type="button" className="button" onClick={() => void Notification.requestPermission().then(setNotifications)}>
              Turn on notifications
            </button>
          ) : null}
          {canWork ? <AwaySwitch /> : null}
        </>
      }
    >
      <p className="lead" aria-live="polite">
        {live.unread.size ? `${live.unread.size} unread` : 'All caught up.'} Conversations from web chat, messaging and calls, newest activity first.
      </p>
      <Filters
        session={session}
        filter={filter}
        onChange={(f) => {
          setFilter(f);
          setCursors([null]);
        }}
      />
      <div className="inbox">
        <section className="inbox-list" aria-labelledby="inbox-list-title">
          <h2 id="inbox-list-title">{STATUSES[filter.status ?? 'open']}</h2>
          {list.isPending ? (
            <Loading what="conversations" />
          ) : list.isError ? (
            <ErrorAlert error={list.error} />
          ) : list.data.conversations.length === 0 ? (
            <p className="empty">No conversations here.</p>
          ) : (
            <ul className="conversations">
              {list.data.conversations.map((c) => (
                <ConversationItem key={c.id} c={c} unread={live.unread.has(c.id)} current={c.id === id} />
              ))}
            </ul>
          )}
          <nav className="pager" aria-label="Conversation pages">
            <button type="button" className="button" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
              Newer
            </button>
            <button type="button" className="button" disabled={!next || list.isPlaceholderData} onClick={() => next && setCursors((c) => [...c, next])}>
              Older
            </button>
          </nav>
        </section>
        <section className="inbox-detail" aria-label="Conversation">
          {id ? <Conversation id={id} session={session} canWork={canWork} /> : <p className="empty">Choose a conversation to read it.</p>}
        </section>
      </div>
      <Team session={session} />
    </Page>
  );
}

function Filters({ session, filter, onChange }: { session: Session; filter: InboxFilter; onChange: (f: InboxFilter) => void }) {
  const agents = useAgentNames(hasScope(session, 'workflows:read'));
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => {
      const v = form.get(name);
      return typeof v === 'string' && v.trim() ? v.trim() : undefined;
    };
    onChange({
      status: (text('status') ?? 'open') as InboxStatus,
      channel: text('channel') as InboxConversation['channel'] | undefined,
      agent_id: text('agent_id'),
      site_id: text('site_id'),
      q: text('q'),
    });
  };
  return (
    <form className="filters" role="search" onSubmit={submit}>
      <label htmlFor="inbox-status">Status</label>
      <select id="inbox-status" name="status" className="select" defaultValue={filter.status}>
        {(Object.keys(STATUSES) as InboxStatus[]).map((s) => (
          <option key={s} value={s}>
            {STATUSES[s]}
          </option>
        ))}
      </select>
      <label htmlFor="inbox-channel">Channel</label>
      <select id="inbox-channel" name="channel" className="select" defaultValue={filter.channel ?? ''}>
        <option value="">Any</option>
        {(Object.keys(CHANNELS) as Array<InboxConversation['channel']>).map((c) => (
          <option key={c} value={c}>
            {CHANNELS[c]}
          </option>
        ))}
      </select>
      <label htmlFor="inbox-agent">Agent</label>
      <select id="inbox-agent" name="agent_id" className="select" defaultValue={filter.agent_id ?? ''} key={agents.data ? 'agents' : 'none'}>
        <option value="">Any</option>
        {agents.data?.agents.map((a) => (
          <option key={a.id} value={a.id}>
            {a.name}
          </option>
        ))}
      </select>
      <label htmlFor="inbox-site">Site id</label>
      <input id="inbox-site" name="site_id" className="input" placeholder="site_…" defaultValue={filter.site_id ?? ''} pattern="site_[0-9a-f]{24}" />
      <label htmlFor="inbox-q">Search transcripts</label>
      <input id="inbox-q" name="q" type="search" className="input" defaultValue={filter.q ?? ''} maxLength={200} />
      <button type="submit" className="button">
        Apply
      </button>
    </form>
  );
}

const who = (c: { customer: InboxConversation['customer'] }) => c.customer?.name || c.customer?.email || c.customer?.phone || 'Visitor';

function ConversationItem({ c, unread, current }: { c: InboxConversation; unread: boolean; current: boolean }) {
  return (
    <li className={current ? 'current' : undefined}>
      <Link to={`/inbox/${c.id}`} aria-current={current ? 'page' : undefined}>
        <span className="who">
          {unread ? <span className="dot" aria-label="Unread" role="img" /> : null}
          {c.title || who(c)}
        </span>
        <span className="preview">{c.last_message ?? ''}</span>
        <span className="meta">
          <span className="tag">{CHANNELS[c.channel]}</span>{' '}
          {c.status === 'closed' ? (
            <span className="tag">Closed</span>
          ) : c.assignee ? (
            <span className="tag">With {c.assignee.name || c.assignee.email}</span>
          ) : c.needs_human ? (
            <span className="tag danger-tag">Waiting for a person{c.queued_at ? ` since ${when(c.queued_at)}` : ''}</span>
          ) : null}{' '}
          {when(c.updated_at)}
        </span>
      </Link>
    </li>
  );
}

function AwaySwitch() {
  const presence = usePresence();
  const set = useSetPresence();
  if (!presence.data) return null;
  const away = presence.data.away;
  return (
    <button type="button" className="button" aria-pressed={away} disabled={set.isPending} onClick={() => set.mutate({ away: !away })}>
      {away ? 'Away: set me available' : 'Set me away'}
    </button>
  );
}

function authorOf(m: InboxDetail['messages'][number]): string {
  if (m.role === 'user') return 'Visitor';
  if (m.author === 'human') return `${m.author_name ?? 'A person'} (person)`;
  return 'Agent';
}

function Conversation({ id, session, canWork }: { id: string; session: Session; canWork: boolean }) {
  const detail = useConversation(id);
  const act = useAct(id);
  const announce = useAnnounce();
  const [closing, setClosing] = useState(false);
  if (detail.isPending) return <Loading what="the conversation" />;
  if (detail.isError) return <ErrorAlert error={detail.error} />;
  const d = detail.data;
  const c = d.conversation;
  const mine = c.assignee?.id === session.user.id;
  const open = c.status === 'open';
  const run = (action: Parameters<typeof act.mutate>[0], done: string) => act.mutate(action, { onSuccess: () => announce(done) });
  return (
    <div className="stack">
      <h2>{c.title || who(c)}</h2>
      <p className="muted">
        {CHANNELS[c.channel]} · {c.agent ? `agent ${c.agent.name}` : 'no agent'} · {open ? 'open' : `closed${c.close_reason ? `: ${c.close_reason}` : ''}`} ·{' '}
        {c.assignee ? `held by ${c.assignee.name || c.assignee.email}` : c.needs_human ? 'waiting for a person' : 'the agent answers'}
      </p>
      {canWork && open ? (
        <div className="toolbar">
          {!mine ? (
            <button type="button" className="button primary" disabled={act.isPending} onClick={() => run({ kind: 'take' }, 'You took over the conversation')}>
              Take over
            </button>
          ) : null}
          {c.needs_human ? (
            <button type="button" className="button" disabled={act.isPending} onClick={() => run({ kind: 'hand_back' }, 'Handed back to the agent')}>
              Hand back to the agent
            </button>
          ) : null}
          <AssignForm onAssign={(assignee_id) => run({ kind: 'assign', assignee_id }, 'Assigned')} busy={act.isPending} />
          <button type="button" className="button" onClick={() => setClosing(true)}>
            Close…
          </button>
        </div>
      ) : null}
      <ErrorAlert error={act.error} />
      <h3>Transcript</h3>
      <ol className="thread" aria-label="Transcript">
        {d.messages.map((m) => (
          <li key={m.id} className={m.role === 'user' ? undefined : 'operator'}>
            <p className="who">
              {authorOf(m)} · {when(m.timestamp)}
            </p>
            <p className="text">{m.text}</p>
            {m.attachments.length ? (
              <ul className="attachments">
                {m.attachments.map((a, i) => {
                  const file = a as { name?: string; url?: string; file_name?: string };
                  const name = file.name ?? file.file_name ?? 'attachment';
                  return <li key={i}>{file.url ? <a href={file.url}>{name}</a> : name}</li>;
                })}
              </ul>
            ) : null}
            {m.citations?.length ? <p className="muted">Sources: {m.citations.map((s) => s.title).join(', ')}</p> : null}
            {m.suggested_actions?.length ? <p className="muted">Suggested: {m.suggested_actions.join(' · ')}</p> : null}
          </li>
        ))}
      </ol>
      {d.recordings.length ? (
        <>
          <h3>Recordings</h3>
          <ul>
            {d.recordings.map((r) => (
              <li key={r.id}>
                <a href={r.url}>
                  {r.kind} recording, {Math.round(r.duration_ms / 1000)} s ({when(r.created_at)})
                </a>
              </li>
            ))}
          </ul>
        </>
      ) : null}
      {canWork && open && d.reply.can_reply ? <ReplyForm detail={d} session={session} /> : null}
      <Notes detail={d} canWork={canWork && open} />
      {closing ? <CloseDialog id={id} onClose={() => setClosing(false)} /> : null}
    </div>
  );
}

function AssignForm({ onAssign, busy }: { onAssign: (id: string) => void; busy: boolean }) {
  const team = useTeam();
  const [to, setTo] = useState('');
  if (!team.data) return null;
  return (
    <form
      className="inline-form"
      onSubmit={(event) => {
        event.preventDefault();
        if (to) onAssign(to);
      }}
    >
      <label htmlFor="assign-to">Assign to</label>
      <select id="assign-to" className="select" value={to} onChange={(e) => setTo(e.target.value)}>
        <option value="">Choose a teammate</option>
        {team.data.team.map((m) => (
          <option key={m.id} value={m.id}>
            {m.name || m.email}
            {m.available ? '' : ' (offline)'}
          </option>
        ))}
      </select>
      <button type="submit" className="button" disabled={!to || busy}>
        Assign
      </button>
    </form>
  );
}

function ReplyForm({ detail, session }: { detail: InboxDetail; session: Session }) {
  const act = useAct(detail.conversation.id);
  const canned = useCannedReplies();
  const announce = useAnnounce();
  const [text, setText] = useState('');
  const [template, setTemplate] = useState('');
  const [variables, setVariables] = useState('');
  const [attached, setAttached] = useState<Array<{ id: string; name: string }>>([]);
  const { reply } = detail;
  const files = useAttachableFiles((reply.channel === 'web' || reply.channel === 'msgapp') && hasScope(session, 'kb:read'));
  // A web chat reply carries up to 3 files; a msgapp reply one (a media message, the text its caption).
  const maxFiles = reply.channel === 'web' ? 3 : 1;
  const uploadFile = useUploadAttachment(detail.conversation.id);
  const chooser = useRef<HTMLInputElement>(null);
  const windowClosed = reply.channel === 'msgapp' && !reply.window_open;
  const agentName = session.user.name || session.user.email.split('@')[0];
  const sendText = (event: FormEvent) => {
    event.preventDefault();
    act.mutate(
      { kind: 'reply', text, ...(attached.length ? { attachments: attached.map((f) => f.id) } : {}) },
      { onSuccess: () => (setText(''), setAttached([]), announce('Reply sent')) },
    );
  };
  const sendTemplate = (event: FormEvent) => {
    event.preventDefault();
    const chosen = reply.templates.find((t) => `${t.name}:${t.language}` === template);
    if (!chosen) return;
    const vars = variables.split('|').map((v) => v.trim()).filter(Boolean);
    act.mutate({ kind: 'reply', template: { name: chosen.name, language: chosen.language, ...(vars.length ? { variables: vars } : {}) } }, { onSuccess: () => announce('Template sent') });
  };
  if (windowClosed) {
    return (
      <form className="stack reply" onSubmit={sendTemplate}>
        <h3>Reply with a template</h3>
        <p className="notice">The customer last wrote more than 24 hours ago: only an approved template can reach them now.</p>
        <div className="field">
          <label htmlFor="reply-template">Template</label>
          <select id="reply-template" className="select" value={template} onChange={(e) => setTemplate(e.target.value)} required>
            <option value="">Choose a template</option>
            {reply.templates.map((t) => (
              <option key={`${t.name}:${t.language}`} value={`${t.name}:${t.language}`}>
                {t.name} ({t.language}): {t.body}
              </option>
            ))}
          </select>
        </div>
        <Field label="Variables" hint="The values of {{1}}, {{2}}… in order, separated by |" value={variables} onChange={(e) => setVariables(e.target.value)} />
        <ErrorAlert error={act.error} />
        <button type="submit" className="button primary" disabled={act.isPending || !template}>
          Send template
        </button>
      </form>
    );
  }
  return (
    <form className="stack reply" onSubmit={sendText}>
      <h3>Reply</h3>
      {canned.data?.canned_replies.length ? (
        <div className="field">
          <label htmlFor="reply-canned">Insert a canned reply</label>
          <select
            id="reply-canned"
            className="select"
            value=""
            onChange={(e) => {
              const picked = canned.data.canned_replies.find((r) => r.id === e.target.value);
              if (picked) setText((t) => `${t}${t ? '\n' : ''}${fillCanned(picked.text, { customer: detail.conversation.customer, agentName })}`);
            }}
          >
            <option value="">Choose one</option>
            {canned.data.canned_replies.map((r) => (
              <option key={r.id} value={r.id}>
                {r.title}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      {reply.channel === 'web' || reply.channel === 'msgapp' ? (
        <div className="field">
          <button type="button" className="button" aria-describedby="reply-upload-hint" disabled={attached.length >= maxFiles || uploadFile.isPending} onClick={() => chooser.current?.click()}>
            {uploadFile.isPending ? 'Uploading…' : 'Attach a file from your computer'}
          </button>
          <input
            ref={chooser}
            hidden
            type="file"
            aria-label="File from your computer"
            onChange={(e) => {
              const file = e.target.files?.[0];
              e.target.value = '';
              if (!file) return;
              uploadFile.mutate(file, {
                onSuccess: (up) => (setAttached((a) => [...a, { id: up.upload_id, name: up.file_name }]), announce(`${up.file_name} attached`)),
              });
            }}
          />
          <p className="hint" id="reply-upload-hint">
            {reply.channel === 'web' ? 'Documents, images, audio and video, up to 25 MB; the visitor gets a download link.' : 'One document, image or video, up to 25 MB; your reply is its caption.'}
          </p>
          <ErrorAlert error={uploadFile.error} />
        </div>
      ) : null}
      {files.data?.files.length ? (
        <div className="field">
          <label htmlFor="reply-attach">Attach a knowledge-base file</label>
          <select
            id="reply-attach"
            className="select"
            value=""
            disabled={attached.length >= maxFiles}
            onChange={(e) => {
              const file = files.data.files.find((f) => f.id === e.target.value);
              if (file && !attached.some((a) => a.id === file.id)) setAttached((a) => [...a, { id: file.id, name: file.name }]);
            }}
          >
            <option value="">{maxFiles > 1 ? `Choose a file (up to ${maxFiles})` : 'Choose a file'}</option>
            {files.data.files.map((f) => (
              <option key={f.id} value={f.id}>
                {f.name}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      {attached.length ? (
        <ul className="attachments" aria-label="Attached files">
          {attached.map((f) => (
            <li key={f.id}>
              {f.name}{' '}
              <button type="button" className="button" aria-label={`Remove ${f.name}`} onClick={() => setAttached((a) => a.filter((x) => x.id !== f.id))}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      <TextArea label="Your reply" required maxLength={4096} value={text} onChange={(e) => setText(e.target.value)} hint={reply.channel === 'web' ? 'The visitor sees it in the chat, from you.' : 'Sent as a message from the agent’s number.'} />
      <ErrorAlert error={act.error} />
      <button type="submit" className="button primary" disabled={act.isPending || !text.trim()}>
        Send reply
      </button>
    </form>
  );
}

function Notes({ detail, canWork }: { detail: InboxDetail; canWork: boolean }) {
  const act = useAct(detail.conversation.id);
  const [text, setText] = useState('');
  return (
    <section className="stack" aria-labelledby="notes-title">
      <h3 id="notes-title">Internal notes</h3>
      <p className="muted">Only your team sees these: never the customer, never a webhook.</p>
      {detail.notes.length ? (
        <ul className="notes" aria-label="Notes">
          {detail.notes.map((n) => (
            <li key={n.id}>
              <p className="who">
                {n.author.email} · {when(n.created_at)}
              </p>
              <p className="text">{n.text}</p>
            </li>
          ))}
        </ul>
      ) : null}
      {canWork ? (
        <form
          className="stack"
          onSubmit={(event) => {
            event.preventDefault();
            act.mutate({ kind: 'note', text }, { onSuccess: () => setText('') });
          }}
        >
          <TextArea label="Note" required maxLength={5000} value={text} onChange={(e) => setText(e.target.value)} />
          <ErrorAlert error={act.error} />
          <button type="submit" className="button" disabled={act.isPending || !text.trim()}>
            Add note
          </button>
        </form>
      ) : null}
    </section>
  );
}

function CloseDialog({ id, onClose }: { id: string; onClose: () => void }) {
  const act = useAct(id);
  const announce = useAnnounce();
  const [reason, setReason] = useState('resolved');
  return (
    <Dialog title="Close the conversation" onClose={onClose}>
      <form
        className="stack"
        onSubmit={(event) => {
          event.preventDefault();
          act.mutate({ kind: 'close', reason }, { onSuccess: () => (announce('Conversation closed'), onClose(), navigate('/inbox')) });
        }}
      >
        <Field label="Reason" required maxLength={500} value={reason} onChange={(e) => setReason(e.target.value)} />
        <ErrorAlert error={act.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={act.isPending}>
            Close conversation
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** The team: who is available, their load and capacity; automatic assignment and canned replies for owners and admins. */
function Team({ session }: { session: Session }) {
  const team = useTeam();
  const auto = useSetAutoAssign();
  const manages = managesWorkspace(session.user.role);
  if (!team.data) return null;
  return (
    <section className="stack" aria-labelledby="team-title">
      <h2 id="team-title">Team and queue</h2>
      <p>
        {team.data.queue_length} waiting in the queue · automatic assignment {team.data.auto_assign ? 'on (round robin)' : 'off'}
      </p>
      {manages ? (
        <div className="toolbar">
          <button type="button" className="button" aria-pressed={team.data.auto_assign} disabled={auto.isPending} onClick={() => auto.mutate(!team.data.auto_assign)}>
            {team.data.auto_assign ? 'Turn automatic assignment off' : 'Turn automatic assignment on'}
          </button>
        </div>
      ) : null}
      <ul>
        {team.data.team.map((m) => (
          <li key={m.id}>
            {m.name || m.email}: {m.available ? 'available' : m.away ? 'away' : 'offline'}, holding {m.holding} of {m.capacity}
          </li>
        ))}
      </ul>
      {manages ? <CannedReplies /> : null}
    </section>
  );
}

function CannedReplies() {
  const canned = useCannedReplies();
  const create = useCreateCanned();
  const remove = useDeleteCanned();
  const [title, setTitle] = useState('');
  const [text, setText] = useState('');
  return (
    <section className="stack" aria-labelledby="canned-title">
      <h3 id="canned-title">Canned replies</h3>
      <p className="muted">Variables: {'{{customer.name}}'}, {'{{customer.email}}'}, {'{{agent.name}}'}.</p>
      <ul>
        {canned.data?.canned_replies.map((r) => (
          <li key={r.id}>
            <strong>{r.title}</strong>: {r.text}{' '}
            <button type="button" className="button" onClick={() => remove.mutate(r.id)} aria-label={`Delete canned reply ${r.title}`}>
              Delete
            </button>
          </li>
        ))}
      </ul>
      <form
        className="stack"
        onSubmit={(event) => {
          event.preventDefault();
          create.mutate({ title, text }, { onSuccess: () => (setTitle(''), setText('')) });
        }}
      >
        <Field label="Title" required maxLength={100} value={title} onChange={(e) => setTitle(e.target.value)} />
        <TextArea label="Text" required maxLength={4000} value={text} onChange={(e) => setText(e.target.value)} />
        <ErrorAlert error={create.error ?? remove.error} />
        <button type="submit" className="button" disabled={create.isPending}>
          Add canned reply
        </button>
      </form>
    </section>
  );
}
