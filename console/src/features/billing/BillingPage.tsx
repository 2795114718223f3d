import { useState } from 'react';
import { DataTable } from '../../components/DataTable';
import { ErrorAlert, Loading } from '../../components/feedback';
import { NotAllowed, Page } from '../../components/Page';
import { when } from '../../lib/format';
import { hasScope, type Session } from '../auth/api';
import { useCredits, useUsage } from './api';

const number = new Intl.NumberFormat(undefined, { maximumFractionDigits: 4 });

/** The credit balance and the usage, priced, as the API keeps them. */
export function BillingPage({ session }: { session: Session }) {
  if (!hasScope(session, 'analytics:read')) return <NotAllowed title="Billing" why="Your role does not read billing." />;
  return <Billing />;
}

function Billing() {
  const credits = useCredits();
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const usage = useUsage(cursors[cursors.length - 1]);
  const next = usage.data?.next_cursor ?? null;
  return (
    <Page title="Billing">
      {credits.isPending ? (
        <Loading what="the balance" />
      ) : credits.isError ? (
        <ErrorAlert error={credits.error} />
      ) : (
        <dl className="facts card">
          <div>
            <dt>Credits left</dt>
            <dd>{number.format(credits.data.balance)}</dd>
          </div>
          <div>
            <dt>Granted</dt>
            <dd>{number.format(credits.data.granted)}</dd>
          </div>
          <div>
            <dt>Used</dt>
            <dd>{number.format(credits.data.used)}</dd>
          </div>
          <div>
            <dt>Updated</dt>
            <dd>{when(credits.data.updated_at, '—')}</dd>
          </div>
        </dl>
      )}
      <section className="section" aria-labelledby="usage-title">
        <h2 id="usage-title">Usage, last 30 days</h2>
        {usage.isPending ? (
          <Loading what="usage" />
        ) : usage.isError ? (
          <ErrorAlert error={usage.error} />
        ) : usage.data.usage.length === 0 ? (
          <p className="empty">No usage in the last 30 days.</p>
        ) : (
          <DataTable
            label="Usage"
            rows={usage.data.usage}
            rowKey={(u) => `${u.day}-${u.kind}`}
            columns={[
              { header: 'Day (UTC)', rowHeader: true, cell: (u) => u.day },
              { header: 'Kind', className: 'mono', cell: (u) => u.kind },
              { header: 'Quantity', cell: (u) => `${number.format(u.quantity)} ${u.unit}` },
              { header: 'Unit price', cell: (u) => `${number.format(u.unit_price)} ${u.currency}` },
              { header: 'Amount', cell: (u) => `${number.format(u.amount)} ${u.currency}` },
            ]}
          />
        )}
        <nav className="pager" aria-label="Usage pages">
          <button type="button" className="button" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
            Newer
          </button>
          <span className="muted">Page {cursors.length}</span>
          <button type="button" className="button" disabled={!next || usage.isPlaceholderData} onClick={() => next && setCursors((c) => [...c, next])}>
            Older
          </button>
        </nav>
      </section>
    </Page>
  );
}
