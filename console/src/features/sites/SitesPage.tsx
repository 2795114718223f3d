import { useId, useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading } from '../../components/feedback';
import { TextArea } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { SecretOnce } from '../../components/SecretOnce';
import { copyToClipboard, when } from '../../lib/format';
import { Link } from '../../lib/router';
import { managesWorkspace, type Session } from '../auth/api';
import { originsOf, useAgents, useCreateSite, useSites, type Site } from './api';

/** The workspace's web-chat sites (owners and admins, as the API allows); add one: its secret and snippet shown once. */
export function SitesPage({ session }: { session: Session }) {
  if (!managesWorkspace(session.user.role)) return <NotAllowed title="Sites" why="Only owners and admins manage web-chat sites." />;
  return <Sites />;
}

function Sites() {
  const sites = useSites();
  const [creating, setCreating] = useState(false);
  return (
    <Page
      title="Sites"
      actions={
        <button type="button" className="button primary" onClick={() => setCreating(true)}>
          Add site
        </button>
      }
    >
      <p className="lead">The websites your chat widget runs on: which agent answers, the origins it may be embedded on, its look, and the code to paste.</p>
      {sites.isPending ? (
        <Loading what="sites" />
      ) : sites.isError ? (
        <ErrorAlert error={sites.error} />
      ) : sites.data.sites.length === 0 ? (
        <p className="empty">No sites yet.</p>
      ) : (
        <DataTable
          label="Sites"
          rows={sites.data.sites}
          rowKey={(s) => s.id}
          columns={[
            {
              header: 'Site',
              rowHeader: true,
              className: 'wrap-anywhere',
              cell: (s) => (
                <Link to={`/sites/${s.id}`} className="mono">
                  {s.id}
                </Link>
              ),
            },
            { header: 'Agent', cell: (s) => s.agent.name ?? <span className="muted">Deleted agent</span> },
            {
              header: 'Origins',
              className: 'wrap-anywhere',
              cell: (s) => (
                <ul className="tags">
                  {s.allowed_origins.map((o) => (
                    <li key={o}>{o}</li>
                  ))}
                </ul>
              ),
            },
            { header: 'Status', cell: (s) => <SiteStatus site={s} /> },
            { header: 'Created', cell: (s) => when(s.created_at) },
          ]}
        />
      )}
      {creating ? <CreateDialog onClose={() => setCreating(false)} /> : null}
    </Page>
  );
}

export function SiteStatus({ site }: { site: Site }) {
  return site.status === 'suspended' ? <span className="tag danger-tag">Suspended</span> : <span className="tag">Active</span>;
}

/** The embed code to paste into the site's pages, in a read-only field, with Copy. */
export function Snippet({ code }: { code: string }) {
  const id = useId();
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const copy = async () => {
    setError(null);
    try {
      await copyToClipboard(code);
      setCopied(true);
    } catch (err) {
      setError(err instanceof Error ? err.message : err);
    }
  };
  return (
    <div className="stack-tight">
      <div className="field">
        <label htmlFor={id}>Embed code</label>
        <textarea id={id} className="mono snippet" readOnly rows={2} value={code} aria-describedby={`${id}-hint`} onFocus={(e) => e.currentTarget.select()} />
        <p className="hint" id={`${id}-hint`}>
          Paste it into every page the chat should appear on, before <span className="mono">&lt;/body&gt;</span>.
        </p>
      </div>
      <div className="row">
        <button type="button" className="button" onClick={copy}>
          Copy embed code
        </button>
        <span role="status" className="muted">
          {copied ? 'Embed code copied to the clipboard.' : ''}
        </span>
      </div>
      <ErrorAlert error={error} />
    </div>
  );
}

function CreateDialog({ onClose }: { onClose: () => void }) {
  const create = useCreateSite();
  const agents = useAgents();
  const agentId = useId();
  const [agent, setAgent] = useState('');
  const [origins, setOrigins] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ agent_id: agent, origins: originsOf(origins) });
  };
  if (create.data) {
    return (
      <Dialog title="Site added" onClose={onClose} wide>
        <SecretOnce
          label="Site secret"
          value={create.data.site_secret}
          note="Your server signs signed-in visitors' user_hash with this secret. Copy it now: it is shown only this once. Keep it on your server, never in a page."
        />
        <Snippet code={create.data.snippet} />
        <div className="dialog-actions">
          <Link to={`/sites/${create.data.id}`} className="button" onClick={onClose}>
            Open the site
          </Link>
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  const list = agents.data?.agents ?? [];
  return (
    <Dialog title="Add a site" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <div className="field">
          <label htmlFor={agentId}>Agent</label>
          <select id={agentId} className="select" required value={agent} onChange={(e) => setAgent(e.target.value)} disabled={!list.length}>
            <option value="">{agents.isPending ? 'Loading agents…' : list.length ? 'Choose the agent that answers' : 'No agents yet'}</option>
            {list.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
                {a.status === 'draft' ? ' (draft)' : ''}
              </option>
            ))}
          </select>
        </div>
        <ErrorAlert error={agents.error} />
        <TextArea
          label="Allowed origins"
          required
          rows={3}
          value={origins}
          onChange={(e) => setOrigins(e.target.value)}
          placeholder="https://shop.example"
          hint="One per line: the scheme and host (and port) of each website the widget may be embedded on."
        />
        <ErrorAlert error={create.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={create.isPending || !agent || !originsOf(origins).length}>
            Add site
          </button>
        </div>
      </form>
    </Dialog>
  );
}
