import { useId, useRef, useState, type FormEvent, type ReactNode } from 'react';
import './agents.css';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { NotAllowed, Page } from '../../components/Page';
import { ApiError, describeError } from '../../lib/api';
import { when } from '../../lib/format';
import { Link } from '../../lib/router';
import { hasScope, managesWorkspace, type Session } from '../auth/api';
import { AgentStatus } from './AgentsPage';
import { TryPanel } from './TryPanel';
import { useAgent, useCredentials, useKbFiles, useKbFolders, useMcpServers, usePublishAgent, useUpdateAgent, type Agent, type AgentPatch, type McpServer } from './api';

type Action = NonNullable<Agent['spec']['actions']>[number];
type WebChat = NonNullable<NonNullable<Agent['spec']['triggers']>['web_chat']>;
const ELEMENT_KINDS = [
  ['suggested_actions', 'Suggested replies'],
  ['cards', 'Cards'],
  ['charts', 'Charts'],
  ['attachments', 'Knowledge-base files as attachments'],
] as const;
type ElementKind = (typeof ELEMENT_KINDS)[number][0];

/** The form's state: the spec's fields as a person edits them (numbers and lists as typed). */
interface Draft {
  name: string;
  instructions: string;
  modelName: string;
  temperature: string;
  maxTokens: string;
  modelCredential: string;
  folderIds: string[];
  fileIds: string[];
  web: boolean;
  origins: string;
  fileUpload: boolean;
  voiceChat: boolean;
  dialOut: boolean;
  delivery: 'stream' | 'complete';
  identity: boolean;
  greeting: string;
  starters: string;
  msgapp: boolean;
  number: string;
  phoneNumberId: string;
  msgappCredential: string;
  sender: boolean;
  senderDescription: string;
  kbSearch: boolean;
  topK: string;
  handoff: boolean;
  handoffMessage: string;
  elements: ElementKind[];
  mcp: Record<string, { on: boolean; tools: string[] | null; chaining: boolean }>;
  mask: boolean;
  templates: Template[];
}

type Template = NonNullable<Agent['spec']['templates']>[number];

function draftOf(a: Agent): Draft {
  const s = a.spec;
  const web = s.triggers?.web_chat;
  const msgapp = s.triggers?.msgapp;
  const actions = s.actions ?? [];
  const find = <T extends Action['type']>(type: T) => actions.find((x) => x.type === type) as Extract<Action, { type: T }> | undefined;
  const mcp: Draft['mcp'] = {};
  for (const x of actions) if (x.type === 'mcp') mcp[x.server_id] = { on: true, tools: x.tools ?? null, chaining: x.cross_server_chaining === true };
  return {
    name: s.name,
    instructions: s.instructions ?? '',
    modelName: s.model?.name ?? '',
    temperature: String(s.model?.temperature ?? 0.3),
    maxTokens: String(s.model?.max_tokens ?? 800),
    modelCredential: s.model?.credential_id ?? '',
    folderIds: s.knowledge_base?.folder_ids ?? [],
    fileIds: s.knowledge_base?.file_ids ?? [],
    web: Boolean(web),
    origins: (web?.allowed_origins ?? []).join('\n'),
    fileUpload: web?.file_upload ?? false,
    voiceChat: web?.voice_chat ?? false,
    dialOut: web?.dial_out ?? false,
    delivery: web?.response_delivery ?? 'stream',
    identity: web?.require_identity_verification ?? false,
    greeting: web?.greeting ?? '',
    starters: (web?.starters ?? []).join('\n'),
    msgapp: Boolean(msgapp),
    number: msgapp?.number ?? '',
    phoneNumberId: msgapp?.phone_number_id ?? '',
    msgappCredential: msgapp?.credential_id ?? '',
    sender: Boolean(find('sender')),
    senderDescription: find('sender')?.description ?? '',
    kbSearch: Boolean(find('kb_search')),
    topK: String(find('kb_search')?.top_k ?? 5),
    handoff: Boolean(find('handoff')),
    handoffMessage: find('handoff')?.message ?? '',
    elements: [...(find('reply_elements')?.kinds ?? [])],
    mcp,
    mask: s.privacy?.mask_personal_details ?? false,
    templates: (s.templates ?? []).map((x) => ({ ...x })),
  };
}

const lines = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
/** A number as typed; left as typed when it is none, so the API says what is wrong with it, next to the field. */
const num = (text: string) => (text.trim() === '' || Number.isNaN(Number(text)) ? (text as unknown as number) : Number(text));

/** The PATCH body: every field of the spec. */
function patchOf(d: Draft, a: Agent): AgentPatch {
  const web: WebChat | undefined = d.web
    ? {
        ...a.spec.triggers?.web_chat,
        allowed_origins: lines(d.origins),
        file_upload: d.fileUpload,
        voice_chat: d.voiceChat,
        dial_out: d.dialOut,
        response_delivery: d.delivery,
        require_identity_verification: d.identity,
        ...(d.greeting.trim() ? { greeting: d.greeting.trim() } : { greeting: undefined }),
        ...(lines(d.starters).length ? { starters: lines(d.starters) } : { starters: undefined }),
      }
    : undefined;
  const actions: Action[] = [];
  if (d.sender) actions.push({ type: 'sender', ...(d.senderDescription.trim() ? { description: d.senderDescription.trim() } : {}) });
  if (d.kbSearch) actions.push({ type: 'kb_search', top_k: num(d.topK) });
  if (d.handoff) actions.push({ type: 'handoff', ...(d.handoffMessage.trim() ? { message: d.handoffMessage.trim() } : {}) });
  if (d.elements.length) actions.push({ type: 'reply_elements', kinds: d.elements });
  for (const [server_id, m] of Object.entries(d.mcp)) {
    if (m.on) actions.push({ type: 'mcp', server_id, ...(m.tools ? { tools: m.tools } : {}), ...(m.chaining ? { cross_server_chaining: true } : {}) });
  }
  return {
    name: d.name.trim(),
    instructions: d.instructions,
    model: { temperature: num(d.temperature), max_tokens: num(d.maxTokens), ...(d.modelName.trim() ? { name: d.modelName.trim() } : {}), ...(d.modelCredential ? { credential_id: d.modelCredential } : {}) },
    knowledge_base: { folder_ids: d.folderIds, file_ids: d.fileIds },
    triggers: {
      ...(web ? { web_chat: web } : {}),
      ...(d.msgapp ? { msgapp: { number: d.number.trim(), phone_number_id: d.phoneNumberId.trim(), ...(d.msgappCredential ? { credential_id: d.msgappCredential } : {}) } } : {}),
    },
    actions,
    privacy: { mask_personal_details: d.mask },
    templates: d.templates.map((x) => ({ ...x, name: x.name.trim(), language: x.language.trim() || 'en' })),
  } as AgentPatch;
}

/** The part of the form an API refusal names: its message starts with the field's path ("body.model.temperature: …", "model.name: …"). */
type Area = 'name' | 'instructions' | 'model' | 'knowledge_base' | 'web_chat' | 'msgapp' | 'actions' | 'privacy' | 'templates' | 'form';
function areaOf(err: unknown): Area {
  if (!(err instanceof ApiError)) return 'form';
  if (err.code === 'credential_not_found') return 'model';
  if (err.code === 'number_in_use' || err.code === 'number_not_owned') return 'msgapp';
  const m = /^(?:body[/.])?([a-z_]+)(?:[/.]([a-z_]+))?/.exec(err.message);
  if (!m) return 'form';
  if (m[1] === 'triggers') return m[2] === 'msgapp' ? 'msgapp' : 'web_chat';
  return (['name', 'instructions', 'model', 'knowledge_base', 'actions', 'privacy', 'templates'] as const).find((x) => x === m[1]) ?? 'form';
}

export function AgentPage({ session, id }: { session: Session; id: string }) {
  if (!hasScope(session, 'workflows:read')) return <NotAllowed title="Agent" why="Your role does not read agents." />;
  return <AgentLoader session={session} id={id} />;
}

function AgentLoader({ session, id }: { session: Session; id: string }) {
  const agent = useAgent(id);
  if (agent.isPending)
    return (
      <Page title="Agent">
        <Loading what="the agent" />
      </Page>
    );
  if (agent.isError)
    return (
      <Page title="Agent">
        <ErrorAlert error={agent.error} />
      </Page>
    );
  // Keyed by the stored version: a save or a publish starts the form again from what the API answered.
  return <AgentEditor key={agent.data.updated_at} agent={agent.data} session={session} />;
}

function AgentEditor({ agent, session }: { agent: Agent; session: Session }) {
  const canWrite = hasScope(session, 'workflows:write');
  const canPublish = hasScope(session, 'workflows:publish');
  const canTry = managesWorkspace(session.user.role);
  const [draft, setDraft] = useState(() => draftOf(agent));
  const [trying, setTrying] = useState(false);
  const tryButton = useRef<HTMLButtonElement>(null);
  // Closed: the focus goes back to the button that opened the panel.
  const closeTry = () => {
    setTrying(false);
    tryButton.current?.focus();
  };
  const update = useUpdateAgent(agent.id);
  const publish = usePublishAgent(agent.id);
  const announce = useAnnounce();
  const set = <K extends keyof Draft>(key: K, value: Draft[K]) => setDraft((d) => ({ ...d, [key]: value }));
  const errorArea = update.error ? areaOf(update.error) : null;
  const errorAt = (area: Area) => (errorArea === area ? update.error : null);
  const save = (event: FormEvent) => {
    event.preventDefault();
    update.mutate(patchOf(draft, agent), { onSuccess: (a) => announce(a.status === 'published' && !a.runnable ? 'Saved, but the agent cannot run: see why above.' : 'Agent saved.') });
  };
  return (
    <Page
      title={agent.name}
      actions={
        <>
          {canTry ? (
            <button ref={tryButton} type="button" className="button" aria-expanded={trying} aria-controls={trying ? 'try-panel' : undefined} onClick={() => setTrying((t) => !t)}>
              {trying ? 'Close Try it' : 'Try it'}
            </button>
          ) : null}
          {canPublish ? (
            <button
              type="button"
              className="button primary"
              disabled={publish.isPending}
              onClick={() => publish.mutate(undefined, { onSuccess: (a) => announce(a.runnable ? `${a.name} is published.` : `${a.name} is published but cannot run.`) })}
            >
              Publish
            </button>
          ) : null}
        </>
      }
    >
      <Link className="back" to="/agents">
        All agents
      </Link>
      <dl className="facts">
        <div>
          <dt>Status</dt>
          <dd>
            <AgentStatus agent={agent} />
          </dd>
        </div>
        <div>
          <dt>Published</dt>
          <dd>{when(agent.published_at, 'Not yet')}</dd>
        </div>
        <div>
          <dt>Id</dt>
          <dd className="mono">{agent.id}</dd>
        </div>
      </dl>
      <ErrorAlert error={publish.error} />
      {agent.invalid_reasons.length ? (
        <div className="notice">
          <p>Why it cannot run:</p>
          <ul>
            {agent.invalid_reasons.map((r) => (
              <li key={r}>{r}</li>
            ))}
          </ul>
        </div>
      ) : null}
      <div className={trying ? 'agent-layout trying' : 'agent-layout'}>
        <form className="stack agent-form" onSubmit={save} aria-label="Agent settings" noValidate>
          {!canWrite ? <p className="notice">Your role can read this agent, not change it.</p> : null}
          <fieldset className="plain" disabled={!canWrite}>
            <Basics draft={draft} set={set} errorAt={errorAt} />
            <ModelSection draft={draft} set={set} error={errorAt('model')} session={session} />
            <KnowledgeSection draft={draft} set={set} error={errorAt('knowledge_base')} session={session} />
            <WebChatSection draft={draft} set={set} error={errorAt('web_chat')} />
            <MsgappSection draft={draft} set={set} error={errorAt('msgapp')} session={session} />
            <ActionsSection draft={draft} set={set} error={errorAt('actions')} session={session} />
            <TemplatesSection draft={draft} set={set} error={errorAt('templates')} />
            <fieldset className="section-box">
              <legend>Privacy</legend>
              <Check label="Mask personal details in replies and the transcript" checked={draft.mask} onChange={(v) => set('mask', v)} />
              <ErrorAlert error={errorAt('privacy')} />
            </fieldset>
            <ErrorAlert error={errorAt('form')} />
            {canWrite ? (
              <div className="toolbar">
                <button type="submit" className="button primary" disabled={update.isPending}>
                  Save changes
                </button>
              </div>
            ) : null}
          </fieldset>
        </form>
        {trying ? <TryPanel agent={agent} onClose={closeTry} /> : null}
      </div>
    </Page>
  );
}

type Setter = <K extends keyof Draft>(key: K, value: Draft[K]) => void;

function Basics({ draft, set, errorAt }: { draft: Draft; set: Setter; errorAt: (a: Area) => unknown }) {
  return (
    <fieldset className="section-box">
      <legend>Basics</legend>
      <TextInput label="Name" value={draft.name} onChange={(v) => set('name', v)} error={errorAt('name')} maxLength={200} />
      <TextInput label="Instructions" multiline value={draft.instructions} onChange={(v) => set('instructions', v)} error={errorAt('instructions')} hint="What the agent does and how it speaks. Published agents need some." />
    </fieldset>
  );
}

function ModelSection({ draft, set, error, session }: { draft: Draft; set: Setter; error: unknown; session: Session }) {
  const credentials = useCredentials('llm', hasScope(session, 'credentials:read'));
  return (
    <fieldset className="section-box">
      <legend>Model</legend>
      <TextInput label="Model name" value={draft.modelName} onChange={(v) => set('modelName', v)} hint="Empty: the installation's model." />
      <div className="row wrap">
        <TextInput label="Temperature" inputMode="decimal" value={draft.temperature} onChange={(v) => set('temperature', v)} hint="0 to 2." />
        <TextInput label="Max tokens" inputMode="numeric" value={draft.maxTokens} onChange={(v) => set('maxTokens', v)} />
      </div>
      <Select
        label="LLM credential"
        value={draft.modelCredential}
        onChange={(v) => set('modelCredential', v)}
        options={[['', "None: the installation's key"], ...(credentials.data?.credentials ?? []).map((c) => [c.id, c.name] as [string, string]), ...(draft.modelCredential && !credentials.data ? [[draft.modelCredential, draft.modelCredential] as [string, string]] : [])]}
      />
      <ErrorAlert error={error} />
    </fieldset>
  );
}

function KnowledgeSection({ draft, set, error, session }: { draft: Draft; set: Setter; error: unknown; session: Session }) {
  const canRead = hasScope(session, 'kb:read');
  const folders = useKbFolders(canRead);
  const files = useKbFiles(folders.data, canRead);
  const toggle = (key: 'folderIds' | 'fileIds', id: string, on: boolean) => set(key, on ? [...draft[key], id] : draft[key].filter((f) => f !== id));
  const knownFolders = new Set((folders.data ?? []).map((f) => f.id));
  const knownFiles = new Set((files.data ?? []).map((f) => f.id));
  return (
    <fieldset className="section-box">
      <legend>Knowledge base</legend>
      <p className="hint">What it answers from: folders (with their subfolders) and single files. None chosen: the whole knowledge base.</p>
      <fieldset className="stack-tight">
        <legend>Folders</legend>
        {(folders.data ?? []).map((f) => (
          <Check key={f.id} label={f.path} checked={draft.folderIds.includes(f.id)} onChange={(v) => toggle('folderIds', f.id, v)} />
        ))}
        {draft.folderIds
          .filter((id) => folders.data && !knownFolders.has(id))
          .map((id) => (
            <Check key={id} label={`${id} (deleted folder)`} checked onChange={(v) => toggle('folderIds', id, v)} />
          ))}
        {folders.data?.length === 0 ? <p className="muted">No folders yet.</p> : null}
      </fieldset>
      <fieldset className="stack-tight">
        <legend>Files</legend>
        {(files.data ?? []).map((f) => (
          <Check key={f.id} label={f.label} checked={draft.fileIds.includes(f.id)} onChange={(v) => toggle('fileIds', f.id, v)} />
        ))}
        {draft.fileIds
          .filter((id) => files.data && !knownFiles.has(id))
          .map((id) => (
            <Check key={id} label={`${id} (not a current file)`} checked onChange={(v) => toggle('fileIds', id, v)} />
          ))}
        {files.data?.length === 0 ? <p className="muted">No files yet.</p> : null}
      </fieldset>
      <ErrorAlert error={error} />
    </fieldset>
  );
}

function WebChatSection({ draft, set, error }: { draft: Draft; set: Setter; error: unknown }) {
  return (
    <fieldset className="section-box">
      <legend>Web chat</legend>
      <Check label="Answer on web chat" checked={draft.web} onChange={(v) => set('web', v)} />
      {draft.web ? (
        <>
          <TextInput label="Allowed origins" multiline value={draft.origins} onChange={(v) => set('origins', v)} hint="One per line, such as https://shop.example." error={error} />
          <Select
            label="Replies"
            value={draft.delivery}
            onChange={(v) => set('delivery', v as Draft['delivery'])}
            options={[
              ['stream', 'Streamed as written'],
              ['complete', 'Whole, when complete'],
            ]}
          />
          <Check label="Visitors may upload files" checked={draft.fileUpload} onChange={(v) => set('fileUpload', v)} />
          <Check label="Voice chat" checked={draft.voiceChat} onChange={(v) => set('voiceChat', v)} />
          <Check label="Dial out to the visitor's phone" checked={draft.dialOut} onChange={(v) => set('dialOut', v)} />
          <Check label="Require identity verification" checked={draft.identity} onChange={(v) => set('identity', v)} />
          <TextInput label="Greeting" value={draft.greeting} onChange={(v) => set('greeting', v)} maxLength={500} hint="The widget's first message; empty: a short hello." />
          <TextInput label="Starter questions" multiline value={draft.starters} onChange={(v) => set('starters', v)} hint="Up to 5, one per line." />
        </>
      ) : null}
      {!draft.web ? <ErrorAlert error={error} /> : null}
    </fieldset>
  );
}

function MsgappSection({ draft, set, error, session }: { draft: Draft; set: Setter; error: unknown; session: Session }) {
  const credentials = useCredentials('msgapp', hasScope(session, 'credentials:read'));
  return (
    <fieldset className="section-box">
      <legend>Messaging number (msgapp)</legend>
      <Check label="Answer on a messaging number" checked={draft.msgapp} onChange={(v) => set('msgapp', v)} />
      {draft.msgapp ? (
        <>
          <TextInput label="Business number" value={draft.number} onChange={(v) => set('number', v)} hint="E.164, such as +15551234567." />
          <TextInput label="Phone number id" value={draft.phoneNumberId} onChange={(v) => set('phoneNumberId', v)} hint="The provider's id of the number." />
          <Select
            label="Messaging credential"
            value={draft.msgappCredential}
            onChange={(v) => set('msgappCredential', v)}
            options={[['', 'None'], ...(credentials.data?.credentials ?? []).map((c) => [c.id, c.name] as [string, string]), ...(draft.msgappCredential && !credentials.data ? [[draft.msgappCredential, draft.msgappCredential] as [string, string]] : [])]}
          />
        </>
      ) : null}
      <ErrorAlert error={error} />
    </fieldset>
  );
}

function ActionsSection({ draft, set, error, session }: { draft: Draft; set: Setter; error: unknown; session: Session }) {
  const servers = useMcpServers(hasScope(session, 'mcp_servers:read'));
  const setMcp = (server: McpServer, change: Partial<Draft['mcp'][string]>) =>
    set('mcp', { ...draft.mcp, [server.id]: { ...(draft.mcp[server.id] ?? { on: false, tools: null, chaining: false }), ...change } });
  return (
    <fieldset className="section-box">
      <legend>Actions and tools</legend>
      <Check label="Sender: may send messages through the API" checked={draft.sender} onChange={(v) => set('sender', v)} />
      {draft.sender ? <TextInput label="Sender description" value={draft.senderDescription} onChange={(v) => set('senderDescription', v)} maxLength={500} /> : null}
      <Check label="Search the knowledge base as a tool" checked={draft.kbSearch} onChange={(v) => set('kbSearch', v)} />
      {draft.kbSearch ? <TextInput label="Passages per search" inputMode="numeric" value={draft.topK} onChange={(v) => set('topK', v)} hint="1 to 20." /> : null}
      <Check label="Hand over to a person" checked={draft.handoff} onChange={(v) => set('handoff', v)} />
      {draft.handoff ? <TextInput label="Handoff message" value={draft.handoffMessage} onChange={(v) => set('handoffMessage', v)} maxLength={1000} /> : null}
      <fieldset className="stack-tight">
        <legend>Reply elements</legend>
        {ELEMENT_KINDS.map(([kind, label]) => (
          <Check key={kind} label={label} checked={draft.elements.includes(kind)} onChange={(v) => set('elements', v ? [...draft.elements, kind] : draft.elements.filter((k) => k !== kind))} />
        ))}
      </fieldset>
      <fieldset className="stack-tight">
        <legend>MCP servers</legend>
        {servers.data?.mcp_servers.length === 0 ? <p className="muted">No MCP servers registered.</p> : null}
        {(servers.data?.mcp_servers ?? []).map((s) => {
          const chosen = draft.mcp[s.id];
          return (
            <div key={s.id} className="stack-tight">
              <Check label={`Use the tools of ${s.name}`} checked={chosen?.on ?? false} onChange={(v) => setMcp(s, { on: v })} />
              {chosen?.on ? (
                <div className="indent stack-tight">
                  {s.tools.map((t) => (
                    <Check
                      key={t.name}
                      label={`${s.name}: ${t.name} (${t.read_only ? 'read-only' : 'acts outside: not run in Try it'})`}
                      checked={chosen.tools === null || chosen.tools.includes(t.name)}
                      onChange={(v) => {
                        const current = chosen.tools ?? s.tools.map((x) => x.name);
                        const next = v ? [...current, t.name] : current.filter((n) => n !== t.name);
                        setMcp(s, { tools: next.length === s.tools.length ? null : next });
                      }}
                    />
                  ))}
                  <Check label={`Allow ${s.name}'s tools after another server's result`} checked={chosen.chaining} onChange={(v) => setMcp(s, { chaining: v })} />
                </div>
              ) : null}
            </div>
          );
        })}
      </fieldset>
      <ErrorAlert error={error} />
    </fieldset>
  );
}

/** The message templates approved for the agent's number (what a send outside the 24-hour window may use). */
function TemplatesSection({ draft, set, error }: { draft: Draft; set: Setter; error: unknown }) {
  const change = (i: number, patch: Partial<Template>) => set('templates', draft.templates.map((x, j) => (j === i ? { ...x, ...patch } : x)));
  return (
    <fieldset className="section-box">
      <legend>Message templates</legend>
      <p className="hint">Templates registered for the messaging number; only approved ones are sent. Placeholders: {'{{1}}'}, {'{{2}}'}…</p>
      {draft.templates.map((x, i) => (
        <fieldset key={i} className="stack-tight">
          <legend>Template {i + 1}</legend>
          <div className="row wrap">
            <TextInput label={`Template ${i + 1} name`} value={x.name} onChange={(v) => change(i, { name: v })} hint="Lowercase letters, digits and underscores." />
            <TextInput label={`Template ${i + 1} language`} value={x.language ?? 'en'} onChange={(v) => change(i, { language: v })} />
            <Select
              label={`Template ${i + 1} status`}
              value={x.status}
              onChange={(v) => change(i, { status: v as Template['status'] })}
              options={[
                ['approved', 'Approved'],
                ['pending', 'Pending'],
                ['rejected', 'Rejected'],
              ]}
            />
          </div>
          <TextInput label={`Template ${i + 1} text`} multiline value={x.body} onChange={(v) => change(i, { body: v })} />
          <div>
            <button type="button" className="button small danger" onClick={() => set('templates', draft.templates.filter((_, j) => j !== i))}>
              Remove template {i + 1}
            </button>
          </div>
        </fieldset>
      ))}
      <div>
        <button type="button" className="button small" onClick={() => set('templates', [...draft.templates, { name: '', language: 'en', body: '', status: 'approved' }])}>
          Add template
        </button>
      </div>
      <ErrorAlert error={error} />
    </fieldset>
  );
}

function Check({ label, checked, onChange }: { label: string; checked: boolean; onChange: (v: boolean) => void }) {
  return (
    <label className="check">
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} /> {label}
    </label>
  );
}

function TextInput(props: { label: string; value: string; onChange: (v: string) => void; hint?: ReactNode; error?: unknown; multiline?: boolean; maxLength?: number; inputMode?: 'decimal' | 'numeric' }) {
  const id = useId();
  const described = [props.hint ? `${id}-hint` : '', props.error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  const common = { id, value: props.value, maxLength: props.maxLength, 'aria-describedby': described, 'aria-invalid': props.error ? true : undefined };
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      {props.multiline ? <textarea {...common} rows={props.label === 'Instructions' ? 8 : 3} onChange={(e) => props.onChange(e.target.value)} /> : <input {...common} inputMode={props.inputMode} onChange={(e) => props.onChange(e.target.value)} />}
      {props.hint ? (
        <p className="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.error ? (
        <p className="alert" id={`${id}-error`} role="alert">
          {describeError(props.error)}
        </p>
      ) : null}
    </div>
  );
}

function Select({ label, value, onChange, options }: { label: string; value: string; onChange: (v: string) => void; options: Array<[string, string]> }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} className="select" value={value} onChange={(e) => onChange(e.target.value)}>
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}
