import { useState, type FormEvent } from 'react';
import { Field } from '../../components/Field';

/** Where "Sign in with SSO" goes: a navigation (not a fetch), since the IdP's pages take over the tab. */
const ssoStartUrl = (email: string) => `/api/console/sso/start?email=${encodeURIComponent(email)}`;

/** What the sign-in page says when an SSO sign-in comes back refused (`/console/sign-in?error=<code>`). */
export function describeSsoError(code: string): string {
  switch (code) {
    case 'sso_unavailable':
      return 'Single sign-on is not set up for this email address. Sign in with your password, or ask an owner of your workspace.';
    case 'sso_expired':
      return 'The sign-in with your identity provider took too long. Try again.';
    case 'sso_email_unverified':
      return 'Your identity provider does not confirm that your email address is verified, so it cannot sign you in here.';
    case 'sso_email_domain':
      return 'The account you used at your identity provider is not one this workspace accepts. Sign in with your work account.';
    case 'sso_account_conflict':
      return 'The account for this email is already linked to another identity at your provider. Ask an owner or an admin of your workspace.';
    case 'sso_user_removed':
      return 'You were removed from this workspace. Ask an owner or an admin to invite you again.';
    case 'rate_limited':
      return 'Too many sign-in attempts from this address. Wait a few minutes, then try again.';
    default:
      return 'The sign-in with your identity provider could not be completed. Try again.';
  }
}

/** What an SSO sign-in came back with (`/console/sign-in?error=<code>`), said for a person; null without one. */
export function ssoErrorInAddress(): string | null {
  const code = new URLSearchParams(window.location.search).get('error');
  return code ? describeSsoError(code) : null;
}

/** Once shown, the address loses the code (a reload or a later sign-in does not show it again). */
export function forgetSsoError(): void {
  if (new URLSearchParams(window.location.search).has('error')) window.history.replaceState(null, '', '/console/');
}

/** Sign in with SSO: the work email names the workspace and its identity provider; the browser goes there. */
export function SsoSignInForm() {
  const [email, setEmail] = useState('');
  const [leaving, setLeaving] = useState(false);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setLeaving(true);
    window.location.assign(ssoStartUrl(email.trim()));
  };
  return (
    <form onSubmit={submit} className="stack">
      <Field label="Work email" type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} hint="You continue at your organisation’s sign-in page." />
      <button type="submit" className="button primary block" disabled={leaving}>
        {leaving ? 'Continuing…' : 'Continue with SSO'}
      </button>
    </form>
  );
}
