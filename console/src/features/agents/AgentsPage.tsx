import { useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import { Link, navigate } from '../../lib/router';
import { hasScope, type Session } from '../auth/api';
import { useAgents, useCreateAgent, type Agent, type NewAgent } from './api';

/** The workspace's agents: status, whether they can run, and a new one (a draft) for those who may edit agents. */
export function AgentsPage({ session }: { session: Session }) {
  if (!hasScope(session, 'workflows:read')) return <NotAllowed title="Agents" why="Your role does not read agents." />;
  return <Agents canWrite={hasScope(session, 'workflows:write')} />;
}

export function AgentStatus({ agent: a }: { agent: Agent }) {
  if (a.status === 'draft') return <span className="tag pending-tag">Draft</span>;
  return a.runnable ? <span className="tag">Published</span> : <span className="tag danger-tag">Published, cannot run</span>;
}

function Agents({ canWrite }: { canWrite: boolean }) {
  const agents = useAgents();
  const [creating, setCreating] = useState(false);
  return (
    <Page
      title="Agents"
      actions={
        canWrite ? (
          <button type="button" className="button primary" onClick={() => setCreating(true)}>
            New agent
          </button>
        ) : null
      }
    >
      <p className="lead">Each agent answers on its channels from its instructions and knowledge. Edit one, try it in a test conversation, then publish it.</p>
      {agents.isPending ? (
        <Loading what="agents" />
      ) : agents.isError ? (
        <ErrorAlert error={agents.error} />
      ) : agents.data.agents.length === 0 ? (
        <p className="empty">No agents yet.</p>
      ) : (
        <DataTable
          label="Agents"
          rows={agents.data.agents}
          rowKey={(a) => a.id}
          columns={[
            { header: 'Name', rowHeader: true, className: 'wrap-anywhere', cell: (a) => <Link to={`/agents/${a.id}`}>{a.name}</Link> },
            { header: 'Status', cell: (a) => <AgentStatus agent={a} /> },
            { header: 'Channels', cell: (a) => [a.spec.triggers?.web_chat ? 'Web chat' : null, a.spec.triggers?.msgapp ? `msgapp ${a.spec.triggers.msgapp.number}` : null].filter(Boolean).join(', ') || 'None' },
            { header: 'Updated', cell: (a) => when(a.updated_at) },
          ]}
        />
      )}
      {creating ? <CreateDialog onClose={() => setCreating(false)} /> : null}
    </Page>
  );
}

function CreateDialog({ onClose }: { onClose: () => void }) {
  const create = useCreateAgent();
  const announce = useAnnounce();
  const [name, setName] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate(
      // The API fills in every other field's default (a draft with no instructions, channels or actions).
      { name: name.trim() } as NewAgent,
      {
        onSuccess: (a) => {
          announce(`${a.name} created as a draft.`);
          onClose();
          navigate(`/agents/${a.id}`);
        },
      },
    );
  };
  return (
    <Dialog title="New agent" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="Agent name" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} hint="A draft: nothing answers until it is published." />
        <ErrorAlert error={create.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={create.isPending}>
            Create agent
          </button>
        </div>
      </form>
    </Dialog>
  );
}
