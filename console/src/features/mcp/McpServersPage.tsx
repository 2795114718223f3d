import { useState, type FormEvent } from 'react';
import { Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { describeError } from '../../lib/api';
import { when } from '../../lib/format';
import { hasScope, type Session } from '../auth/api';
import { useMcpCredentials, useMcpServers, useRegisterMcpServer, useUpdateMcpServer, type McpServer } from './api';

const STATUS = { ok: 'Connected', error: 'Failing', disabled: 'Disabled' } as const;

/** Remote MCP tool servers the agents may call: each with its tools as last listed, and its last check. */
export function McpServersPage({ session }: { session: Session }) {
  if (!hasScope(session, 'mcp_servers:read')) return <NotAllowed title="MCP servers" why="Your role does not read MCP servers." />;
  return <McpServers canWrite={hasScope(session, 'mcp_servers:write')} canUseCredentials={hasScope(session, 'credentials:write')} />;
}

function McpServers({ canWrite, canUseCredentials }: { canWrite: boolean; canUseCredentials: boolean }) {
  const servers = useMcpServers();
  const [adding, setAdding] = useState(false);
  return (
    <Page
      title="MCP servers"
      actions={
        canWrite ? (
          <button type="button" className="button primary" onClick={() => setAdding(true)}>
            Add server
          </button>
        ) : null
      }
    >
      <p className="lead">Tool servers your agents can call (Model Context Protocol). Each is checked when added or changed, and its tools listed.</p>
      {servers.isPending ? (
        <Loading what="MCP servers" />
      ) : servers.isError ? (
        <ErrorAlert error={servers.error} />
      ) : servers.data.mcp_servers.length === 0 ? (
        <p className="empty">No MCP servers yet.</p>
      ) : (
        <ul className="cards single">
          {servers.data.mcp_servers.map((s) => (
            <ServerCard key={s.id} server={s} canWrite={canWrite} />
          ))}
        </ul>
      )}
      {adding ? <AddDialog canUseCredentials={canUseCredentials} onClose={() => setAdding(false)} /> : null}
    </Page>
  );
}

function ServerCard({ server: s, canWrite }: { server: McpServer; canWrite: boolean }) {
  const update = useUpdateMcpServer();
  const announce = useAnnounce();
  const change = (enabled: boolean, said: string) => update.mutate({ id: s.id, enabled }, { onSuccess: () => announce(said), onError: (err) => announce(describeError(err)) });
  return (
    <li className="card">
      <h2 className="card-title">{s.name}</h2>
      <p className="mono wrap-anywhere">{s.url}</p>
      <p>
        <span className={s.status === 'ok' ? 'tag' : 'tag danger-tag'}>{STATUS[s.status]}</span> <span className="muted">checked {when(s.checked_at, 'never')}</span>
      </p>
      {s.last_error ? <p className="alert">{s.last_error}</p> : null}
      <details>
        <summary>
          {s.tools.length} {s.tools.length === 1 ? 'tool' : 'tools'}
        </summary>
        <ul className="tools">
          {s.tools.map((tool) => (
            <li key={tool.name}>
              <span className="mono">{tool.name}</span> <span className="muted">{tool.description}</span>
            </li>
          ))}
        </ul>
      </details>
      {canWrite ? (
        <div className="row-actions start">
          <button type="button" className="button small" disabled={update.isPending} onClick={() => change(true, `${s.name} checked again.`)} aria-label={`Check again ${s.name}`}>
            Check again
          </button>
          <button
            type="button"
            className="button small"
            disabled={update.isPending}
            onClick={() => change(!s.enabled, s.enabled ? `${s.name} disabled.` : `${s.name} enabled.`)}
            aria-label={`${s.enabled ? 'Disable' : 'Enable'} ${s.name}`}
          >
            {s.enabled ? 'Disable' : 'Enable'}
          </button>
        </div>
      ) : null}
    </li>
  );
}

function AddDialog({ canUseCredentials, onClose }: { canUseCredentials: boolean; onClose: () => void }) {
  const register = useRegisterMcpServer();
  const credentials = useMcpCredentials(canUseCredentials);
  const announce = useAnnounce();
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [auth, setAuth] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    register.mutate(
      { name: name.trim(), url: url.trim(), enabled: true, ...(auth ? { auth } : {}) },
      {
        onSuccess: (s) => {
          announce(s.status === 'ok' ? `${s.name} added: ${s.tools.length} tools.` : `${s.name} added, but the check failed: ${s.last_error ?? 'no answer'}.`);
          onClose();
        },
      },
    );
  };
  return (
    <Dialog title="Add an MCP server" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="Name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
        <Field label="URL" type="url" required value={url} onChange={(e) => setUrl(e.target.value)} hint="Streamable HTTP; https." />
        {canUseCredentials ? (
          <div className="field">
            <label htmlFor="mcp-auth">Bearer token</label>
            <select id="mcp-auth" className="select" value={auth} onChange={(e) => setAuth(e.target.value)}>
              <option value="">None</option>
              {(credentials.data?.credentials ?? []).map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name}
                </option>
              ))}
            </select>
            <p className="hint">An MCP credential from the Credentials page.</p>
          </div>
        ) : null}
        <ErrorAlert error={register.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={register.isPending}>
            Add server
          </button>
        </div>
      </form>
    </Dialog>
  );
}
