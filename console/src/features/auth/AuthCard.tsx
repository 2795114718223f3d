import type { ReactNode } from 'react';
import { Page } from '../../components/Page';

/** The signed-out pages: one card in the middle of the screen. */
export function AuthCard({ title, children }: { title: string; children: ReactNode }) {
  return (
    <main className="auth" id="main">
      <div className="card auth-card">
        <p className="brand">
          <span className="brand-mark" aria-hidden="true" />
          Concierge
        </p>
        <Page title={title}>{children}</Page>
      </div>
    </main>
  );
}
