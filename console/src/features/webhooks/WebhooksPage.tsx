import { useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { SecretOnce } from '../../components/SecretOnce';
import { when } from '../../lib/format';
import { Link } from '../../lib/router';
import { hasScope, type Session } from '../auth/api';
import { EVENTS, useCreateSubscription, useSubscriptions, type EventName, type Subscription } from './api';

/** The workspace's webhook endpoints, with their delivery health; `webhooks:write` adds one (the secret shown once). */
export function WebhooksPage({ session }: { session: Session }) {
  if (!hasScope(session, 'webhooks:read')) return <NotAllowed title="Webhooks" why="Your role does not read webhook subscriptions." />;
  return <Webhooks canWrite={hasScope(session, 'webhooks:write')} />;
}

function Webhooks({ canWrite }: { canWrite: boolean }) {
  const subscriptions = useSubscriptions();
  const [creating, setCreating] = useState(false);
  return (
    <Page
      title="Webhooks"
      actions={
        canWrite ? (
          <button type="button" className="button primary" onClick={() => setCreating(true)}>
            Add endpoint
          </button>
        ) : null
      }
    >
      <p className="lead">Signed POSTs to your backend when messages arrive or change. Each delivery is retried, logged, and can be sent again.</p>
      {subscriptions.isPending ? (
        <Loading what="webhook endpoints" />
      ) : subscriptions.isError ? (
        <ErrorAlert error={subscriptions.error} />
      ) : subscriptions.data.subscriptions.length === 0 ? (
        <p className="empty">No endpoints yet.</p>
      ) : (
        <DataTable
          label="Webhook endpoints"
          rows={subscriptions.data.subscriptions}
          rowKey={(s) => s.id}
          columns={[
            { header: 'Endpoint', rowHeader: true, className: 'wrap-anywhere', cell: (s) => <Link to={`/webhooks/${s.id}`}>{s.url}</Link> },
            {
              header: 'Events',
              cell: (s) => (
                <ul className="tags">
                  {s.events.map((e) => (
                    <li key={e}>{e}</li>
                  ))}
                </ul>
              ),
            },
            { header: 'Status', cell: (s) => <Health subscription={s} /> },
            { header: 'Last delivered', cell: (s) => when(s.health.last_delivered_at) },
          ]}
        />
      )}
      {creating ? <CreateDialog onClose={() => setCreating(false)} /> : null}
    </Page>
  );
}

/** Paused, failing, retrying or fine, in words. */
export function Health({ subscription: s }: { subscription: Subscription }) {
  if (s.status === 'disabled') return <span className="tag danger-tag">Paused{s.disabled_reason ? `: ${s.disabled_reason}` : ''}</span>;
  const trouble = [s.health.failed_now ? `${s.health.failed_now} failed` : '', s.health.retrying_now ? `${s.health.retrying_now} retrying` : ''].filter(Boolean);
  if (trouble.length) return <span className="tag danger-tag">{trouble.join(', ')}</span>;
  return <span className="tag">Active</span>;
}

/** The events to send, as checkboxes. */
export function EventChoice({ chosen, onChange }: { chosen: Set<EventName>; onChange: (next: Set<EventName>) => void }) {
  return (
    <fieldset className="stack-tight">
      <legend>Events</legend>
      {(Object.keys(EVENTS) as EventName[]).map((event) => (
        <label key={event} className="check">
          <input
            type="checkbox"
            checked={chosen.has(event)}
            onChange={(e) => {
              const next = new Set(chosen);
              if (e.target.checked) next.add(event);
              else next.delete(event);
              onChange(next);
            }}
          />
          <span>
            <span className="mono">{event}</span> <span className="muted">{EVENTS[event]}</span>
          </span>
        </label>
      ))}
    </fieldset>
  );
}

function CreateDialog({ onClose }: { onClose: () => void }) {
  const create = useCreateSubscription();
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState(new Set(Object.keys(EVENTS) as EventName[]));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ url: url.trim(), events: [...events] });
  };
  if (create.data) {
    return (
      <Dialog title="Endpoint added" onClose={onClose}>
        <SecretOnce label="Signing secret" value={create.data.secret} note="Verify each delivery's signature with this secret. Copy it now: it is shown only this once." />
        <div className="dialog-actions">
          <Link to={`/webhooks/${create.data.id}`} className="button" onClick={onClose}>
            Open the endpoint
          </Link>
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog title="Add a webhook endpoint" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="URL" type="url" required value={url} onChange={(e) => setUrl(e.target.value)} placeholder="https://example.com/hooks/concierge" hint="An https address of a public host." />
        <EventChoice chosen={events} onChange={setEvents} />
        <ErrorAlert error={create.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={create.isPending || events.size === 0}>
            Add endpoint
          </button>
        </div>
      </form>
    </Dialog>
  );
}
