import { useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { ConfirmDialog, Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { SecretOnce } from '../../components/SecretOnce';
import { describeError } from '../../lib/api';
import { when } from '../../lib/format';
import { Link, navigate } from '../../lib/router';
import { hasScope, type Session } from '../auth/api';
import {
  useDeleteSubscription,
  useDeliveries,
  useDelivery,
  useReplay,
  useRetryDelivery,
  useSubscription,
  useTestSubscription,
  useUpdateSubscription,
  type Delivery,
  type DeliveryStatus,
  type EventName,
  type Subscription,
} from './api';
import { EventChoice, Health } from './WebhooksPage';

/** One endpoint: its health, its settings (`webhooks:write`), and its delivery log with retry and replay. */
export function WebhookPage({ session, id }: { session: Session; id: string }) {
  if (!hasScope(session, 'webhooks:read')) return <NotAllowed title="Webhook endpoint" why="Your role does not read webhook subscriptions." />;
  return <Webhook id={id} canWrite={hasScope(session, 'webhooks:write')} />;
}

type Open = 'edit' | 'rotate' | 'delete' | null;

function Webhook({ id, canWrite }: { id: string; canWrite: boolean }) {
  const subscription = useSubscription(id);
  const [open, setOpen] = useState<Open>(null);
  const close = () => setOpen(null);
  if (subscription.isPending) return <Loading what="the endpoint" />;
  if (subscription.isError) {
    return (
      <Page title="Webhook endpoint">
        <ErrorAlert error={subscription.error} />
        <Link to="/webhooks">All webhook endpoints</Link>
      </Page>
    );
  }
  const s = subscription.data;
  return (
    <Page title="Webhook endpoint">
      <Link to="/webhooks" className="back">
        All webhook endpoints
      </Link>
      <dl className="facts card">
        <div className="wide-fact">
          <dt>URL</dt>
          <dd className="mono">{s.url}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd>
            <Health subscription={s} />
          </dd>
        </div>
        <div>
          <dt>Events</dt>
          <dd>{s.events.join(', ')}</dd>
        </div>
        <div>
          <dt>Last delivered</dt>
          <dd>{when(s.health.last_delivered_at)}</dd>
        </div>
        <div>
          <dt>Failing since</dt>
          <dd>{when(s.health.failing_since, '—')}</dd>
        </div>
        {s.health.last_error ? (
          <div className="wide-fact">
            <dt>Last error</dt>
            <dd>{s.health.last_error}</dd>
          </div>
        ) : null}
      </dl>
      {canWrite ? <Actions subscription={s} onOpen={setOpen} /> : null}
      <Deliveries id={id} canWrite={canWrite} />
      {canWrite ? <Replay id={id} /> : null}
      {open === 'edit' ? <EditDialog subscription={s} onClose={close} /> : null}
      {open === 'rotate' ? <RotateDialog subscription={s} onClose={close} /> : null}
      {open === 'delete' ? <DeleteDialog subscription={s} onClose={close} /> : null}
    </Page>
  );
}

function Actions({ subscription: s, onOpen }: { subscription: Subscription; onOpen: (open: Open) => void }) {
  const test = useTestSubscription(s.id);
  const update = useUpdateSubscription(s.id);
  const announce = useAnnounce();
  const paused = s.status === 'disabled';
  return (
    <div className="toolbar">
      <button
        type="button"
        className="button"
        disabled={test.isPending}
        onClick={() =>
          test.mutate(undefined, {
            onSuccess: (r) => announce(r.delivered ? `Test event delivered: the endpoint answered ${r.status}.` : `Test event not delivered: ${r.error ?? `the endpoint answered ${r.status}`}.`),
            onError: (err) => announce(describeError(err)),
          })
        }
      >
        Send test event
      </button>
      <button
        type="button"
        className="button"
        disabled={update.isPending}
        onClick={() =>
          update.mutate(
            { status: paused ? 'active' : 'disabled' },
            { onSuccess: () => announce(paused ? 'Deliveries resumed.' : 'Deliveries paused.'), onError: (err) => announce(describeError(err)) },
          )
        }
      >
        {paused ? 'Re-enable' : 'Pause'}
      </button>
      <button type="button" className="button" onClick={() => onOpen('edit')}>
        Edit
      </button>
      <button type="button" className="button" onClick={() => onOpen('rotate')}>
        Rotate secret
      </button>
      <button type="button" className="button danger" onClick={() => onOpen('delete')}>
        Delete
      </button>
    </div>
  );
}

const STATUSES: Array<{ value: DeliveryStatus | ''; label: string }> = [
  { value: '', label: 'All' },
  { value: 'failed', label: 'Failed' },
  { value: 'pending', label: 'Pending' },
  { value: 'delivered', label: 'Delivered' },
];

/** The delivery log: newest first, by status, a page at a time; a failed delivery can be sent again (same delivery id). */
function Deliveries({ id, canWrite }: { id: string; canWrite: boolean }) {
  const [status, setStatus] = useState<DeliveryStatus | ''>('');
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const [shown, setShown] = useState<string | null>(null);
  const deliveries = useDeliveries(id, status, cursors[cursors.length - 1]);
  const retry = useRetryDelivery(id);
  const announce = useAnnounce();
  const next = deliveries.data?.next_cursor ?? null;
  return (
    <section className="section" aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">Deliveries</h2>
      <div className="filters">
        <label htmlFor="delivery-status">Status</label>
        <select
          id="delivery-status"
          className="select"
          value={status}
          onChange={(e) => {
            setStatus(e.target.value as DeliveryStatus | '');
            setCursors([null]);
          }}
        >
          {STATUSES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
        </select>
      </div>
      {deliveries.isPending ? (
        <Loading what="deliveries" />
      ) : deliveries.isError ? (
        <ErrorAlert error={deliveries.error} />
      ) : deliveries.data.deliveries.length === 0 ? (
        <p className="empty">No deliveries{status ? ` ${status}` : ''} yet.</p>
      ) : (
        <DataTable
          label="Deliveries"
          rows={deliveries.data.deliveries}
          rowKey={(d) => d.id}
          columns={[
            { header: 'Delivery', rowHeader: true, className: 'mono wrap-anywhere', cell: (d) => d.id },
            { header: 'Event', cell: (d) => d.event_type },
            { header: 'Status', cell: (d) => <span className={d.status === 'failed' ? 'tag danger-tag' : 'tag'}>{d.status}</span> },
            { header: 'Attempts', cell: (d) => d.attempt_count },
            { header: 'Last answer', cell: lastAnswer },
            { header: 'Created', cell: (d) => when(d.created_at) },
            {
              header: 'Actions',
              hideHeader: true,
              cell: (d) => (
                <div className="row-actions">
                  <button type="button" className="button small" onClick={() => setShown(d.id)} aria-label={`Details of ${d.id}`}>
                    Details
                  </button>
                  {canWrite && d.status === 'failed' ? (
                    <button
                      type="button"
                      className="button small"
                      disabled={retry.isPending}
                      aria-label={`Retry ${d.id}`}
                      onClick={() => retry.mutate(d.id, { onSuccess: () => announce(`Delivery ${d.id} is being sent again.`), onError: (err) => announce(describeError(err)) })}
                    >
                      Retry
                    </button>
                  ) : null}
                </div>
              ),
            },
          ]}
        />
      )}
      <nav className="pager" aria-label="Delivery pages">
        <button type="button" className="button" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Newer
        </button>
        <span className="muted">Page {cursors.length}</span>
        <button type="button" className="button" disabled={!next || deliveries.isPlaceholderData} onClick={() => next && setCursors((c) => [...c, next])}>
          Older
        </button>
      </nav>
      {shown ? <DeliveryDialog id={id} deliveryId={shown} onClose={() => setShown(null)} /> : null}
    </section>
  );
}

function lastAnswer(d: Delivery): string {
  if (d.last_status_code) return `HTTP ${d.last_status_code}`;
  return d.last_error ?? '—';
}

function DeliveryDialog({ id, deliveryId, onClose }: { id: string; deliveryId: string; onClose: () => void }) {
  const delivery = useDelivery(id, deliveryId);
  return (
    <Dialog title={`Delivery ${deliveryId}`} onClose={onClose} wide>
      {delivery.isPending ? (
        <Loading what="the delivery" />
      ) : delivery.isError ? (
        <ErrorAlert error={delivery.error} />
      ) : (
        <>
          <h3>Attempts</h3>
          {delivery.data.attempts.length === 0 ? (
            <p className="muted">No attempt yet.</p>
          ) : (
            <DataTable
              label="Attempts"
              rows={delivery.data.attempts}
              rowKey={(a) => `${a.run}-${a.attempt}`}
              columns={[
                { header: 'Run', cell: (a) => a.run },
                { header: 'Attempt', cell: (a) => a.attempt },
                { header: 'Started', cell: (a) => when(a.started_at) },
                { header: 'Answer', cell: (a) => (a.status_code ? `HTTP ${a.status_code}` : (a.error ?? '—')) },
                { header: 'Time', cell: (a) => `${a.latency_ms} ms` },
                { header: 'Response', className: 'mono wrap-anywhere', cell: (a) => a.response_body ?? '' },
              ]}
            />
          )}
          <h3>Payload</h3>
          <pre className="payload" tabIndex={0} role="region" aria-label="Payload">
            {JSON.stringify(delivery.data.payload, null, 2)}
          </pre>
        </>
      )}
      <div className="dialog-actions">
        <button type="button" className="button primary" onClick={onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}

/** Every failed delivery created in a window, sent again (each keeps its delivery id). */
function Replay({ id }: { id: string }) {
  const replay = useReplay(id);
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    replay.mutate({ since: new Date(since).toISOString(), until: new Date(until).toISOString() });
  };
  return (
    <section className="section" aria-labelledby="replay-title">
      <h2 id="replay-title">Replay failed deliveries</h2>
      <p className="muted">Send again every failed delivery created in a time window (your local time).</p>
      <form className="filters" onSubmit={submit}>
        <Field label="From" type="datetime-local" required value={since} onChange={(e) => setSince(e.target.value)} />
        <Field label="Until" type="datetime-local" required value={until} onChange={(e) => setUntil(e.target.value)} />
        <button type="submit" className="button" disabled={replay.isPending}>
          Replay
        </button>
      </form>
      <ErrorAlert error={replay.error} />
      <p role="status">{replay.data ? `${replay.data.replayed} ${replay.data.replayed === 1 ? 'delivery' : 'deliveries'} sent again.` : ''}</p>
    </section>
  );
}

function EditDialog({ subscription: s, onClose }: { subscription: Subscription; onClose: () => void }) {
  const update = useUpdateSubscription(s.id);
  const [url, setUrl] = useState(s.url);
  const [events, setEvents] = useState(new Set<EventName>(s.events));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    update.mutate({ url: url.trim(), events: [...events] }, { onSuccess: onClose });
  };
  return (
    <Dialog title="Edit the endpoint" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="URL" type="url" required value={url} onChange={(e) => setUrl(e.target.value)} />
        <EventChoice chosen={events} onChange={setEvents} />
        <ErrorAlert error={update.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={update.isPending || events.size === 0}>
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function RotateDialog({ subscription: s, onClose }: { subscription: Subscription; onClose: () => void }) {
  const update = useUpdateSubscription(s.id);
  if (update.data?.secret) {
    return (
      <Dialog title="Secret rotated" onClose={onClose}>
        <SecretOnce label="New signing secret" value={update.data.secret} note="Deliveries are signed with this secret from now on. Copy it now: it is shown only this once." />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  return (
    <ConfirmDialog
      title="Rotate the signing secret?"
      body={<p>Deliveries are signed with a new secret at once; your endpoint must verify with the new one.</p>}
      confirm="Rotate secret"
      busy={update.isPending}
      error={update.error}
      onConfirm={() => update.mutate({ rotate_secret: true })}
      onClose={onClose}
    />
  );
}

function DeleteDialog({ subscription: s, onClose }: { subscription: Subscription; onClose: () => void }) {
  const remove = useDeleteSubscription(s.id);
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title="Delete this endpoint?"
      body={<p>Nothing more is sent to {s.url}; pending deliveries stop.</p>}
      confirm="Delete endpoint"
      danger
      busy={remove.isPending}
      error={remove.error}
      onConfirm={() =>
        remove.mutate(undefined, {
          onSuccess: () => {
            announce('Endpoint deleted.');
            navigate('/webhooks', { replace: true });
          },
        })
      }
      onClose={onClose}
    />
  );
}
