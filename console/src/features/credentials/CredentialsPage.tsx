import { useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import { hasScope, type Session } from '../auth/api';
import { useCredentials, useRegisterCredential, useResources, type Credential, type NewCredential, type Provider } from './api';

type FieldOf<P extends Provider> = Exclude<keyof Extract<NewCredential, { provider: P }>, 'name' | 'provider'> & string;
interface FieldSpec<P extends Provider> {
  name: FieldOf<P>;
  label: string;
  secret?: boolean;
  optional?: boolean;
  hint?: string;
}

/** The form of each provider: its fields as the API names them (a provider or a field the API drops fails the build). */
const PROVIDERS: { [P in Provider]: { label: string; fields: Array<FieldSpec<P>> } } = {
  msgapp: {
    label: 'msgapp (WhatsApp Cloud API)',
    fields: [
      { name: 'access_token', label: 'Access token', secret: true },
      { name: 'business_account_id', label: 'Business account id', optional: true, hint: 'Digits; needed to list its phone numbers.' },
    ],
  },
  llm: {
    label: 'Language model (OpenAI-compatible)',
    fields: [
      { name: 'api_key', label: 'API key', secret: true },
      { name: 'base_url', label: 'Base URL', optional: true, hint: 'The server, with or without /v1; empty for the default.' },
    ],
  },
  voice: {
    label: 'Voice server (LiveKit-style)',
    fields: [
      { name: 'url', label: 'URL', hint: 'wss:// or https://' },
      { name: 'api_key', label: 'API key id' },
      { name: 'api_secret', label: 'API secret', secret: true },
    ],
  },
  telephony: {
    label: 'SIP trunk',
    fields: [
      { name: 'username', label: 'Username' },
      { name: 'password', label: 'Password', secret: true },
      { name: 'sip_uri', label: 'SIP URI', optional: true, hint: 'e.g. sip:trunk.example.com' },
      { name: 'from_number', label: 'Caller id', optional: true, hint: "E.164, e.g. +14155550100; with the SIP URI, this workspace's calls use this trunk." },
    ],
  },
  mcp: {
    label: 'MCP server token',
    fields: [
      { name: 'bearer_token', label: 'Bearer token', secret: true },
      { name: 'origin', label: 'Origin', optional: true, hint: 'The MCP server it is for; default: the first server it is attached to.' },
    ],
  },
};

/** Provider credentials: secrets are write-only (the list shows the last four and a fingerprint, never the secret). */
export function CredentialsPage({ session }: { session: Session }) {
  if (!hasScope(session, 'credentials:read')) return <NotAllowed title="Credentials" why="Your role does not read provider credentials." />;
  return <Credentials canWrite={hasScope(session, 'credentials:write')} />;
}

function Credentials({ canWrite }: { canWrite: boolean }) {
  const credentials = useCredentials();
  const [adding, setAdding] = useState(false);
  const [resourcesOf, setResourcesOf] = useState<Credential | null>(null);
  return (
    <Page
      title="Credentials"
      actions={
        canWrite ? (
          <button type="button" className="button primary" onClick={() => setAdding(true)}>
            Add credential
          </button>
        ) : null
      }
    >
      <p className="lead">Your own accounts at providers (messaging, models, voice, SIP, MCP). A secret is sealed when it is added and never shown again.</p>
      {credentials.isPending ? (
        <Loading what="credentials" />
      ) : credentials.isError ? (
        <ErrorAlert error={credentials.error} />
      ) : credentials.data.credentials.length === 0 ? (
        <p className="empty">No credentials yet.</p>
      ) : (
        <DataTable
          label="Credentials"
          rows={credentials.data.credentials}
          rowKey={(c) => c.id}
          columns={[
            { header: 'Name', rowHeader: true, cell: (c) => c.name },
            { header: 'Provider', cell: (c) => c.provider },
            { header: 'Secret', className: 'mono', cell: (c) => `${c.secret_field}: ${c.last4 ? `…${c.last4}` : 'set'}` },
            {
              header: 'Settings',
              className: 'wrap-anywhere',
              cell: (c) =>
                Object.entries(c.settings)
                  .map(([k, v]) => `${k}: ${v}`)
                  .join(', ') || '—',
            },
            { header: 'Added', cell: (c) => when(c.created_at) },
            {
              header: 'Actions',
              hideHeader: true,
              cell: (c) =>
                c.provider === 'msgapp' || c.provider === 'llm' ? (
                  <button type="button" className="button small" onClick={() => setResourcesOf(c)} aria-label={`Resources of ${c.name}`}>
                    Resources
                  </button>
                ) : null,
            },
          ]}
        />
      )}
      {adding ? <AddDialog onClose={() => setAdding(false)} /> : null}
      {resourcesOf ? <ResourcesDialog credential={resourcesOf} onClose={() => setResourcesOf(null)} /> : null}
    </Page>
  );
}

function AddDialog({ onClose }: { onClose: () => void }) {
  const register = useRegisterCredential();
  const announce = useAnnounce();
  const [provider, setProvider] = useState<Provider>('msgapp');
  const [name, setName] = useState('');
  const [values, setValues] = useState<Record<string, string>>({});
  const fields = PROVIDERS[provider].fields as Array<FieldSpec<Provider>>;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const given = Object.fromEntries(fields.filter((f) => values[f.name]?.trim()).map((f) => [f.name, values[f.name].trim()]));
    // One shape per provider; the fields above are the chosen provider's, named as the API names them.
    register.mutate({ name: name.trim(), provider, ...given } as NewCredential, {
      onSuccess: (c) => {
        announce(`Credential ${c.name} added.`);
        onClose();
      },
    });
  };
  return (
    <Dialog title="Add a credential" onClose={onClose}>
      <form className="stack" onSubmit={submit} autoComplete="off">
        <div className="field">
          <label htmlFor="credential-provider">Provider</label>
          <select
            id="credential-provider"
            className="select"
            value={provider}
            onChange={(e) => {
              setProvider(e.target.value as Provider);
              setValues({});
            }}
          >
            {(Object.keys(PROVIDERS) as Provider[]).map((p) => (
              <option key={p} value={p}>
                {PROVIDERS[p].label}
              </option>
            ))}
          </select>
        </div>
        <Field label="Name" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} />
        {fields.map((f) => (
          <Field
            key={`${provider}-${f.name}`}
            label={f.optional ? `${f.label} (optional)` : f.label}
            type={f.secret ? 'password' : 'text'}
            autoComplete={f.secret ? 'new-password' : 'off'}
            required={!f.optional}
            value={values[f.name] ?? ''}
            onChange={(e) => setValues((v) => ({ ...v, [f.name]: e.target.value }))}
            hint={f.secret ? 'Sealed when added; never shown again.' : f.hint}
          />
        ))}
        <ErrorAlert error={register.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={register.isPending}>
            Add credential
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function ResourcesDialog({ credential, onClose }: { credential: Credential; onClose: () => void }) {
  const resources = useResources(credential.id);
  return (
    <Dialog title={`What ${credential.name} unlocks`} onClose={onClose}>
      {resources.isPending ? (
        <Loading what="the provider's answer" />
      ) : resources.isError ? (
        <ErrorAlert error={resources.error} />
      ) : resources.data.resources.length === 0 ? (
        <p className="muted">The provider lists nothing for this credential.</p>
      ) : (
        <ul>
          {resources.data.resources.map((r) => (
            <li key={r.id}>{r.type === 'phone_number' ? `${r.display_phone_number}${r.verified_name ? ` (${r.verified_name})` : ''} · id ${r.id}` : `${r.id}${r.owned_by ? ` · ${r.owned_by}` : ''}`}</li>
          ))}
        </ul>
      )}
      <div className="dialog-actions">
        <button type="button" className="button primary" onClick={onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}
