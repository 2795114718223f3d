import { useState, type FormEvent } from 'react';
import { DataTable, type Column } from '../../components/DataTable';
import { ConfirmDialog, Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { SecretOnce } from '../../components/SecretOnce';
import { describeError } from '../../lib/api';
import { copyToClipboard, when } from '../../lib/format';
import { managesWorkspace, type Session } from '../auth/api';
import { useCopyKey, useCreateKey, useDeleteKey, useKeys, useRotateKey, useScopes, type ApiKey, type NewKey } from './api';

type Open = { kind: 'create' } | { kind: 'rotate'; key: ApiKey } | { kind: 'delete'; key: ApiKey } | null;

/**
 * The workspace's API keys, as the contract's console describes them: listed by name and prefix, created with the four
 * default scopes pre-selected and the value shown once; copied to the clipboard (never shown) when the key's value is
 * kept sealed (`copyable`); rotated (the new value shown once) and deleted, each at once.
 */
export function KeysPage({ session }: { session: Session }) {
  if (!managesWorkspace(session.user.role)) return <NotAllowed title="API keys" why="Only owners and admins manage API keys. Ask one of them if you need a key." />;
  return <Keys />;
}

function Keys() {
  const keys = useKeys();
  const [open, setOpen] = useState<Open>(null);
  const close = () => setOpen(null);
  return (
    <Page
      title="API keys"
      actions={
        <button type="button" className="button primary" onClick={() => setOpen({ kind: 'create' })}>
          Create key
        </button>
      }
    >
      <p className="lead">Keys let your backend call the API. A key&apos;s full value is shown once, when it is created or rotated.</p>
      {keys.isPending ? <Loading what="keys" /> : keys.isError ? <ErrorAlert error={keys.error} /> : <KeyTable keys={keys.data.keys} onRotate={(key) => setOpen({ kind: 'rotate', key })} onDelete={(key) => setOpen({ kind: 'delete', key })} />}
      {open?.kind === 'create' ? <CreateKeyDialog onClose={close} /> : null}
      {open?.kind === 'rotate' ? <RotateKeyDialog apiKey={open.key} onClose={close} /> : null}
      {open?.kind === 'delete' ? <DeleteKeyDialog apiKey={open.key} onClose={close} /> : null}
    </Page>
  );
}

function KeyTable({ keys, onRotate, onDelete }: { keys: ApiKey[]; onRotate: (key: ApiKey) => void; onDelete: (key: ApiKey) => void }) {
  if (keys.length === 0) return <p className="empty">No keys yet. Create one to call the API.</p>;
  const columns: Array<Column<ApiKey>> = [
    {
      header: 'Name',
      rowHeader: true,
      cell: (key) => (
        <>
          {key.name}
          {key.status === 'revoked' ? <span className="tag danger-tag">Deleted</span> : null}
        </>
      ),
    },
    { header: 'Key', className: 'mono', cell: (key) => `${key.prefix}…` },
    {
      header: 'Scopes',
      cell: (key) => (
        <ul className="tags">
          {key.scopes.map((scope) => (
            <li key={scope}>{scope}</li>
          ))}
        </ul>
      ),
    },
    { header: 'Created', cell: (key) => when(key.created_at) },
    { header: 'Last used', cell: (key) => when(key.last_used_at) },
    {
      header: 'Actions',
      hideHeader: true,
      cell: (key) =>
        key.status === 'revoked' ? null : (
          <div className="row-actions">
            {key.copyable ? <CopyKeyButton apiKey={key} /> : null}
            <button type="button" className="button small" onClick={() => onRotate(key)} aria-label={`Rotate ${key.name}`}>
              Rotate
            </button>
            <button type="button" className="button small danger" onClick={() => onDelete(key)} aria-label={`Delete ${key.name}`}>
              Delete
            </button>
          </div>
        ),
    },
  ];
  return <DataTable label="API keys" columns={columns} rows={keys} rowKey={(key) => key.id} />;
}

/** Copy: the value goes from the API's answer to the clipboard, never into the page. */
function CopyKeyButton({ apiKey }: { apiKey: ApiKey }) {
  const copy = useCopyKey();
  const announce = useAnnounce();
  const run = () =>
    copy.mutate(apiKey.id, {
      onSuccess: async ({ key }) => {
        try {
          await copyToClipboard(key);
          announce(`Copied the value of ${apiKey.name} to the clipboard.`);
        } catch (err) {
          announce(err instanceof Error ? err.message : 'The clipboard refused the value.');
        }
      },
      onError: (err) => announce(describeError(err)),
    });
  return (
    <button type="button" className="button small" onClick={run} disabled={copy.isPending} aria-label={`Copy ${apiKey.name}`}>
      Copy
    </button>
  );
}

function CreateKeyDialog({ onClose }: { onClose: () => void }) {
  const scopes = useScopes();
  const create = useCreateKey();
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<Set<string> | null>(null);
  const selected = chosen ?? new Set((scopes.data?.scopes ?? []).filter((s) => s.default).map((s) => s.scope));
  const toggle = (scope: string, on: boolean) => {
    const next = new Set(selected);
    if (on) next.add(scope);
    else next.delete(scope);
    setChosen(next);
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ name: name.trim(), scopes: [...selected] as NewKey['scopes'] });
  };
  if (create.data) {
    return (
      <Dialog title={`Key “${create.data.name}” created`} onClose={onClose}>
        <SecretOnce label="Key value" value={create.data.key} note="Copy the key now: this is the only time its full value is shown." />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog title="Create an API key" onClose={onClose} wide>
      <form onSubmit={submit} className="stack">
        <Field label="Name" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} hint="Say where it is used, e.g. “production backend”." />
        {scopes.isPending ? (
          <Loading what="scopes" />
        ) : scopes.isError ? (
          <ErrorAlert error={scopes.error} />
        ) : (
          <fieldset className="scopes">
            <legend>Scopes</legend>
            {scopes.data.scopes.map(({ scope, label }) => (
              <label key={scope} className="check">
                <input type="checkbox" checked={selected.has(scope)} onChange={(e) => toggle(scope, e.target.checked)} />
                <span>
                  <span className="mono">{scope}</span> <span className="muted">{label}</span>
                </span>
              </label>
            ))}
          </fieldset>
        )}
        <ErrorAlert error={create.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={create.isPending || selected.size === 0}>
            Create key
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function RotateKeyDialog({ apiKey, onClose }: { apiKey: ApiKey; onClose: () => void }) {
  const rotate = useRotateKey();
  if (rotate.data) {
    return (
      <Dialog title={`Key “${apiKey.name}” rotated`} onClose={onClose}>
        <SecretOnce label="New key value" value={rotate.data.key} note="The old value no longer works. Copy the new one now: this is the only time it is shown." />
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
      title={`Rotate “${apiKey.name}”?`}
      body={<p>A new value replaces this key&apos;s value. The current value stops working at once, wherever it is used.</p>}
      confirm="Rotate key"
      busy={rotate.isPending}
      error={rotate.error}
      onConfirm={() => rotate.mutate(apiKey.id)}
      onClose={onClose}
    />
  );
}

function DeleteKeyDialog({ apiKey, onClose }: { apiKey: ApiKey; onClose: () => void }) {
  const remove = useDeleteKey();
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title={`Delete “${apiKey.name}”?`}
      body={<p>Requests with this key are refused from now on. This cannot be undone.</p>}
      confirm="Delete key"
      danger
      busy={remove.isPending}
      error={remove.error}
      onConfirm={() =>
        remove.mutate(apiKey.id, {
          onSuccess: () => {
            announce(`Deleted the key ${apiKey.name}.`);
            onClose();
          },
        })
      }
      onClose={onClose}
    />
  );
}
