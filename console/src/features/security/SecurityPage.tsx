import { useState, type FormEvent } from 'react';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { Page } from '../../components/Page';
import type { Session } from '../auth/api';
import { useBeginTotp, useConfirmTotp, useRequireTotp, useTotpStatus } from './api';

/** Two-step sign-in: the person's own second factor (TOTP), and for an owner whether the workspace requires it. */
export function SecurityPage({ session }: { session: Session }) {
  const status = useTotpStatus();
  return (
    <Page title="Two-step sign-in">
      <p className="lead">With two-step sign-in, a password sign-in also asks for the six-digit code of an authenticator app. Single sign-on leaves this to your identity provider.</p>
      {status.isPending ? (
        <Loading what="two-step sign-in" />
      ) : status.isError ? (
        <ErrorAlert error={status.error} />
      ) : (
        <>
          <h2>Your account</h2>
          {status.data.enrolled ? <p>Two-step sign-in is on for your account. Lost your app? An owner or an admin can reset it.</p> : <Enrol />}
          {session.user.role === 'owner' ? <Requirement required={status.data.required} /> : status.data.required ? <p>Your workspace requires two-step sign-in.</p> : null}
        </>
      )}
    </Page>
  );
}

function Enrol() {
  const begin = useBeginTotp();
  const confirm = useConfirmTotp();
  const announce = useAnnounce();
  const [code, setCode] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    confirm.mutate(code.trim(), { onSuccess: () => announce('Two-step sign-in is on.') });
  };
  if (!begin.data) {
    return (
      <div className="stack">
        <p>Two-step sign-in is off for your account.</p>
        <ErrorAlert error={begin.error} />
        <div className="row-actions start">
          <button type="button" className="button primary" disabled={begin.isPending} onClick={() => begin.mutate()}>
            Turn on two-step sign-in
          </button>
        </div>
      </div>
    );
  }
  return (
    <form className="stack" onSubmit={submit} autoComplete="off">
      <p>
        Add this key to an authenticator app (it is shown once): <a href={begin.data.otpauth_uri}>open in an authenticator app</a>, or type it:{' '}
        <code className="mono wrap-anywhere">{begin.data.secret}</code>
      </p>
      <Field label="Authentication code" inputMode="numeric" autoComplete="one-time-code" required value={code} onChange={(e) => setCode(e.target.value)} hint="The six digits the app shows, to confirm." />
      <ErrorAlert error={confirm.error} />
      <div className="row-actions start">
        <button type="submit" className="button primary" disabled={confirm.isPending}>
          Confirm
        </button>
      </div>
    </form>
  );
}

function Requirement({ required }: { required: boolean }) {
  const set = useRequireTotp();
  const announce = useAnnounce();
  return (
    <div className="stack">
      <h2>Your workspace</h2>
      <label className="check">
        <input
          type="checkbox"
          checked={required}
          disabled={set.isPending}
          onChange={(e) => set.mutate(e.target.checked, { onSuccess: (r) => announce(r.required ? 'Two-step sign-in is now required.' : 'Two-step sign-in is no longer required.') })}
        />
        <span>Require two-step sign-in of everyone signing in with a password (those without it set it up at their next sign-in)</span>
      </label>
      <ErrorAlert error={set.error} />
    </div>
  );
}
