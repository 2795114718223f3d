import { useState, type FormEvent } from 'react';
import { ConfirmDialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import type { Session } from '../auth/api';
import { useDeleteSso, useSaveSso, useSsoSettings, type SsoRole, type SsoSettings } from './api';

const ROLES: Array<{ role: SsoRole; label: string }> = [
  { role: 'viewer', label: 'Viewer (reads everything)' },
  { role: 'agent', label: 'Agent (conversations and customers)' },
  { role: 'admin', label: 'Admin (everything but owners and SSO)' },
];

/** Single sign-on (OpenID Connect) for the workspace: the owner's alone, as the API says (403 for anyone else). */
export function SsoPage({ session }: { session: Session }) {
  if (session.user.role !== 'owner') return <NotAllowed title="Single sign-on" why="Only an owner manages single sign-on." />;
  return <Sso />;
}

function Sso() {
  const settings = useSsoSettings();
  return (
    <Page title="Single sign-on">
      <p className="lead">
        People whose email is at one of your domains sign in through your identity provider (OpenID Connect). Only emails the provider says are verified are accepted;
        a person is linked to their provider account at the first sign-in.
      </p>
      {settings.isPending ? <Loading what="single sign-on" /> : settings.isError ? <ErrorAlert error={settings.error} /> : <SsoForm key={settings.data?.updated_at ?? 'new'} current={settings.data} />}
    </Page>
  );
}

function SsoForm({ current }: { current: SsoSettings | null }) {
  const save = useSaveSso();
  const remove = useDeleteSso();
  const announce = useAnnounce();
  const [issuer, setIssuer] = useState(current?.issuer ?? '');
  const [clientId, setClientId] = useState(current?.client_id ?? '');
  const [secret, setSecret] = useState('');
  const [domains, setDomains] = useState(current?.email_domains.join(', ') ?? '');
  const [role, setRole] = useState<SsoRole>(current?.default_role ?? 'viewer');
  const [enabled, setEnabled] = useState(current?.enabled ?? true);
  const [confirming, setConfirming] = useState(false);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const email_domains = domains
      .split(/[\s,]+/)
      .map((d) => d.trim())
      .filter(Boolean);
    save.mutate(
      { issuer: issuer.trim(), client_id: clientId.trim(), ...(secret ? { client_secret: secret } : {}), email_domains, default_role: role, enabled },
      {
        onSuccess: () => {
          setSecret('');
          announce('Single sign-on saved.');
        },
      },
    );
  };
  return (
    <>
      {current ? (
        <p>
          Register this redirect URI at your identity provider: <code className="mono wrap-anywhere">{current.redirect_uri}</code>. Last changed {when(current.updated_at)}.
        </p>
      ) : (
        <p>Create a confidential client (authorization code flow) at your identity provider, with this console’s callback as its redirect URI; it is shown here once saved.</p>
      )}
      <form className="stack" onSubmit={submit} autoComplete="off">
        <Field label="Issuer URL" type="url" required value={issuer} onChange={(e) => setIssuer(e.target.value)} hint="https://…, as your provider’s discovery document names it." />
        <Field label="Client ID" required value={clientId} onChange={(e) => setClientId(e.target.value)} />
        <Field
          label="Client secret"
          type="password"
          autoComplete="new-password"
          required={!current}
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
          hint={current ? `Stored, ending in …${current.client_secret_last4}. Leave empty to keep it.` : 'Sealed when saved and never shown again.'}
        />
        <Field label="Email domains" required value={domains} onChange={(e) => setDomains(e.target.value)} hint="Separated by commas, e.g. example.com, example.org. A domain belongs to one workspace only." />
        <div className="field">
          <label htmlFor="sso-role">Role of new people</label>
          <select id="sso-role" value={role} onChange={(e) => setRole(e.target.value as SsoRole)}>
            {ROLES.map((r) => (
              <option key={r.role} value={r.role}>
                {r.label}
              </option>
            ))}
          </select>
        </div>
        <label className="check">
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
          <span>Enabled</span>
        </label>
        <ErrorAlert error={save.error} />
        <div className="row-actions start">
          <button type="submit" className="button primary" disabled={save.isPending}>
            {save.isPending ? 'Saving…' : 'Save'}
          </button>
          {current ? (
            <button type="button" className="button danger" onClick={() => setConfirming(true)}>
              Remove single sign-on
            </button>
          ) : null}
        </div>
      </form>
      {confirming ? (
        <ConfirmDialog
          title="Remove single sign-on?"
          body={<p>People will sign in with their passwords only; those without one need a link from an owner or an admin.</p>}
          confirm="Remove"
          danger
          busy={remove.isPending}
          error={remove.error}
          onConfirm={() =>
            remove.mutate(undefined, {
              onSuccess: () => {
                setConfirming(false);
                announce('Single sign-on removed.');
              },
            })
          }
          onClose={() => setConfirming(false)}
        />
      ) : null}
    </>
  );
}
