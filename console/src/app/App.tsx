import { Page } from '../components/Page';

/** The console's first page, until its sign-in lands with the console's API (docs/console.md). */
export function App() {
  return (
    <main className="auth" id="main">
      <div className="card auth-card">
        <p className="brand">
          <span className="brand-mark" aria-hidden="true" />
          Concierge
        </p>
        <Page title="Concierge console">
          <p>Sign-in opens here once the console&apos;s API is in place.</p>
        </Page>
      </div>
    </main>
  );
}
