import { useEffect, useState, type FormEvent } from 'react';
import { ErrorAlert } from '../../components/feedback';
import { Field } from '../../components/Field';
import { ApiError } from '../../lib/api';
import { useRequestPasswordReset, useSignIn } from './api';
import { AuthCard } from './AuthCard';
import { asksForCode, enrolmentOf, SecondFactorFields, secondFactorMessage, type TotpEnrolment } from './SecondFactor';
import { forgetSsoError, ssoErrorInAddress, SsoSignInForm } from './SsoSignIn';

/**
 * Sign-in by email and password, or with SSO (the identity provider's pages, then back here signed in); the page stays
 * where it was asked for, and shows it once signed in. A refused SSO sign-in comes back with its code, shown here.
 */
export function SignIn() {
  const [mode, setMode] = useState<'sign-in' | 'reset' | 'sso'>('sign-in');
  const [ssoError] = useState(ssoErrorInAddress);
  useEffect(forgetSsoError, []);
  if (mode === 'reset') return <ResetForm onBack={() => setMode('sign-in')} />;
  if (mode === 'sso') return <SsoCard onBack={() => setMode('sign-in')} />;
  return <SignInForm onForgot={() => setMode('reset')} onSso={() => setMode('sso')} ssoError={ssoError} />;
}

function SsoCard({ onBack }: { onBack: () => void }) {
  return (
    <AuthCard title="Sign in with SSO">
      <SsoSignInForm />
      <p className="center">
        <button type="button" className="linkish" onClick={onBack}>
          Use a password instead
        </button>
      </p>
    </AuthCard>
  );
}

/** The workspaces a sign-in opened (409 workspace_required): the person picks one. */
function workspacesOf(err: unknown): Array<{ id: string; name: string }> {
  if (!(err instanceof ApiError) || err.code !== 'workspace_required' || !Array.isArray(err.body.workspaces)) return [];
  return (err.body.workspaces as Array<{ id?: unknown; name?: unknown }>).filter((w) => typeof w.id === 'string').map((w) => ({ id: String(w.id), name: String(w.name ?? w.id) }));
}

function SignInForm({ onForgot, onSso, ssoError }: { onForgot: () => void; onSso: () => void; ssoError: string | null }) {
  const signIn = useSignIn();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [workspaces, setWorkspaces] = useState<Array<{ id: string; name: string }>>([]);
  const [workspaceId, setWorkspaceId] = useState('');
  // The second factor: asked once the password was right (401 second_factor_required), or enrolled here when the
  // workspace requires one (403 totp_enrolment_required carries the secret to add to an authenticator app).
  const [askCode, setAskCode] = useState(false);
  const [code, setCode] = useState('');
  const [enrolment, setEnrolment] = useState<TotpEnrolment | null>(null);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate(
      { email: email.trim(), password, ...(workspaceId ? { workspace_id: workspaceId } : {}), ...(askCode && code.trim() ? { totp_code: code.trim() } : {}) },
      {
        onError: (err) => {
          const found = workspacesOf(err);
          if (found.length) {
            setWorkspaces(found);
            setWorkspaceId(found[0].id);
          }
          if (asksForCode(err)) setAskCode(true);
          const offered = enrolmentOf(err);
          if (offered) setEnrolment(offered);
          if (err instanceof ApiError && err.code === 'invalid_totp_code') setCode('');
        },
      },
    );
  };
  const choosing = workspaces.length > 0;
  return (
    <AuthCard title="Sign in to Concierge">
      <form onSubmit={submit} className="stack">
        <Field label="Email" type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <Field label="Password" type="password" name="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        {askCode ? <SecondFactorFields enrolment={enrolment} code={code} onCode={setCode} /> : null}
        {choosing ? (
          <fieldset className="stack-tight">
            <legend>Workspace</legend>
            {workspaces.map((w) => (
              <label key={w.id} className="check">
                <input type="radio" name="workspace" value={w.id} checked={workspaceId === w.id} onChange={() => setWorkspaceId(w.id)} />
                <span>{w.name}</span>
              </label>
            ))}
          </fieldset>
        ) : null}
        <ErrorAlert error={choosing && signIn.error instanceof ApiError && signIn.error.code === 'workspace_required' ? 'This email address belongs to several workspaces: choose one, then sign in again.' : secondFactorMessage(signIn.error) ?? (signIn.isIdle ? ssoError : null)} />
        <button type="submit" className="button primary block" disabled={signIn.isPending}>
          {signIn.isPending ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p className="center">
        <button type="button" className="button block" onClick={onSso}>
          Use single sign-on (SSO)
        </button>
      </p>
      <p className="center">
        <button type="button" className="linkish" onClick={onForgot}>
          Forgot your password?
        </button>
      </p>
    </AuthCard>
  );
}

function ResetForm({ onBack }: { onBack: () => void }) {
  const reset = useRequestPasswordReset();
  const [email, setEmail] = useState('');
  return (
    <AuthCard title="Reset your password">
      {reset.isSuccess ? (
        <p role="status">
          If <strong>{email}</strong> has an account here, a link to set a new password is on its way (when this installation sends email). An owner or an admin can
          also make you a link from the People page.
        </p>
      ) : (
        <form
          className="stack"
          onSubmit={(event) => {
            event.preventDefault();
            reset.mutate(email.trim());
          }}
        >
          <Field label="Email" type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
          <ErrorAlert error={reset.error} />
          <button type="submit" className="button primary block" disabled={reset.isPending}>
            Send a reset link
          </button>
        </form>
      )}
      <p className="center">
        <button type="button" className="linkish" onClick={onBack}>
          Back to sign-in
        </button>
      </p>
    </AuthCard>
  );
}
