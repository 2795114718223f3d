import { useState, type ReactNode } from 'react';
import { ErrorAlert } from '../components/feedback';
import { Link, navigate, usePath } from '../lib/router';
import { useSignOut, type Session } from '../features/auth/api';
import type { Section } from './sections';

/** The signed-in frame: a skip link, the header (workspace, person, sign-out), the navigation by role, the page. */
export function Shell({ session, sections, children }: { session: Session; sections: Section[]; children: ReactNode }) {
  const path = usePath();
  const signOut = useSignOut();
  const [menuOpen, setMenuOpen] = useState(false);
  const current = (s: Section) => (s.path === '/' ? path === '/' : path === s.path || path.startsWith(`${s.path}/`));
  const out = (everywhere: boolean) => signOut.mutate(everywhere, { onSettled: () => navigate('/', { replace: true }) });
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/" className="brand">
          <span className="brand-mark" aria-hidden="true" />
          Concierge
        </Link>
        <span className="workspace">{session.workspace.name}</span>
        <button type="button" className="button menu-toggle" aria-expanded={menuOpen} aria-controls="console-nav" onClick={() => setMenuOpen((o) => !o)}>
          Menu
        </button>
      </header>
      <div className={menuOpen ? 'body menu-open' : 'body'}>
        <nav id="console-nav" className="sidenav" aria-label="Console">
          <ul>
            {sections.map((s) => (
              <li key={s.path}>
                <Link to={s.path} aria-current={current(s) ? 'page' : undefined} onClick={() => setMenuOpen(false)}>
                  {s.label}
                </Link>
              </li>
            ))}
          </ul>
          <div className="me">
            <p>
              <span className="me-email">{session.user.email}</span>
              <span className="muted"> · {session.user.role}</span>
            </p>
            <button type="button" className="button block" onClick={() => out(false)} disabled={signOut.isPending}>
              Sign out
            </button>
            <button type="button" className="button block" onClick={() => out(true)} disabled={signOut.isPending}>
              Sign out everywhere
            </button>
            <ErrorAlert error={signOut.error} />
          </div>
        </nav>
        <main id="main" className="content">
          {children}
        </main>
      </div>
    </div>
  );
}
