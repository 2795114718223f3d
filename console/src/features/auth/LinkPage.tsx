import { useState, type FormEvent } from 'react';
import { ErrorAlert, Loading } from '../../components/feedback';
import { Field } from '../../components/Field';
import { ApiError } from '../../lib/api';
import { when } from '../../lib/format';
import { Link, navigate } from '../../lib/router';
import { useLink, useRedeemLink } from './api';
import { asksForCode, enrolmentOf, SecondFactorFields, secondFactorMessage, type TotpEnrolment } from './SecondFactor';
import { AuthCard } from './AuthCard';

const TITLES = { invitation: 'Accept your invitation', sign_in: 'Set your password', password_reset: 'Choose a new password' } as const;
const MIN_PASSWORD = 12;

/** The token of a one-time link: in the fragment (`/console/link#token=…`, never sent to a server) or the path. */
export function linkToken(path: string, hash: string): string | null {
  const fromHash = new URLSearchParams(hash.replace(/^#/, '')).get('token');
  if (fromHash) return fromHash;
  const fromPath = /^\/link\/([^/]+)$/.exec(path);
  return fromPath ? decodeURIComponent(fromPath[1]) : null;
}

/** /console/link: an invitation, the first owner's sign-in link or a password reset; a password set, a session begun. */
export function LinkPage({ token }: { token: string | null }) {
  if (!token) {
    return (
      <AuthCard title="This link cannot be used">
        <ErrorAlert error="This link is incomplete. Copy the whole link you were given into the address bar." />
        <p className="center">
          <Link to="/">Go to sign-in</Link>
        </p>
      </AuthCard>
    );
  }
  return <LinkForm token={token} />;
}

function LinkForm({ token }: { token: string }) {
  const link = useLink(token);
  const redeem = useRedeemLink(token);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [mismatch, setMismatch] = useState(false);
  const [askCode, setAskCode] = useState(false);
  const [code, setCode] = useState('');
  const [enrolment, setEnrolment] = useState<TotpEnrolment | null>(null);

  if (link.isPending) {
    return (
      <AuthCard title="One-time link">
        <Loading what="the link" />
      </AuthCard>
    );
  }
  if (link.isError) {
    const gone = link.error instanceof ApiError && (link.error.status === 404 || link.error.status === 410);
    return (
      <AuthCard title="This link cannot be used">
        <ErrorAlert error={gone ? 'This link is no longer valid: it was used already, or it expired. Ask an owner or an admin for a new one.' : link.error} />
        <p className="center">
          <Link to="/">Go to sign-in</Link>
        </p>
      </AuthCard>
    );
  }
  const info = link.data;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setMismatch(password !== again);
    if (password !== again) return;
    redeem.mutate(
      { password, ...(info.kind === 'invitation' && name.trim() ? { name: name.trim() } : {}), ...(askCode && code.trim() ? { totp_code: code.trim() } : {}) },
      {
        onSuccess: () => navigate('/', { replace: true }),
        // A reset of an account with a second factor asks for its code, as a sign-in does.
        onError: (err) => {
          if (asksForCode(err)) setAskCode(true);
          const offered = enrolmentOf(err);
          if (offered) setEnrolment(offered);
        },
      },
    );
  };
  return (
    <AuthCard title={TITLES[info.kind]}>
      <p>
        For <strong>{info.email}</strong> in the workspace <strong>{info.workspace.name}</strong>. The link works once, until {when(info.expires_at)}.
      </p>
      <form className="stack" onSubmit={submit}>
        {info.kind === 'invitation' ? <Field label="Your name" autoComplete="name" value={name} placeholder={info.name ?? ''} onChange={(e) => setName(e.target.value)} /> : null}
        <input type="email" hidden readOnly autoComplete="username" value={info.email} />
        <Field
          label="New password"
          type="password"
          autoComplete="new-password"
          required
          minLength={MIN_PASSWORD}
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          hint={`At least ${MIN_PASSWORD} characters; common passwords and your email address are refused.`}
        />
        <Field label="Repeat the password" type="password" autoComplete="new-password" required value={again} onChange={(e) => setAgain(e.target.value)} />
        {askCode ? <SecondFactorFields enrolment={enrolment} code={code} onCode={setCode} /> : null}
        <ErrorAlert error={mismatch ? 'The two passwords differ.' : secondFactorMessage(redeem.error)} />
        <button type="submit" className="button primary block" disabled={redeem.isPending}>
          Set password and sign in
        </button>
      </form>
    </AuthCard>
  );
}
