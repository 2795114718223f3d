import { Page } from '../../components/Page';
import { when } from '../../lib/format';
import { Link } from '../../lib/router';
import type { Session } from '../auth/api';
import type { Section } from '../../app/sections';

/** The console's home: who is signed in where, and the pages this role has. */
export function Overview({ session, sections }: { session: Session; sections: Section[] }) {
  const pages = sections.filter((s) => s.path !== '/');
  return (
    <Page title="Overview">
      <dl className="facts card">
        <div>
          <dt>Workspace</dt>
          <dd>{session.workspace.name}</dd>
        </div>
        <div>
          <dt>Signed in as</dt>
          <dd>{session.user.name ? `${session.user.name} (${session.user.email})` : session.user.email}</dd>
        </div>
        <div>
          <dt>Role</dt>
          <dd>{session.user.role}</dd>
        </div>
        <div>
          <dt>Session ends</dt>
          <dd>{when(session.expires_at)}</dd>
        </div>
      </dl>
      {pages.length ? (
        <>
          <h2>Your pages</h2>
          <ul className="cards">
            {pages.map((s) => (
              <li key={s.path} className="card">
                <Link to={s.path}>{s.label}</Link>
                <p className="muted">{s.about}</p>
              </li>
            ))}
          </ul>
        </>
      ) : null}
    </Page>
  );
}
