import { useState, type FormEvent } from 'react';
import { DataTable } from '../../components/DataTable';
import { ConfirmDialog, Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { SecretOnce } from '../../components/SecretOnce';
import { when } from '../../lib/format';
import { managesWorkspace, type Session } from '../auth/api';
import { useChangeRole, useInvite, useIssueLink, useRemoveUser, useResetTotp, useUsers, type User } from './api';

type Role = User['role'];
const ROLES: Array<{ role: Role; says: string }> = [
  { role: 'owner', says: 'everything, including owners and sign-in settings' },
  { role: 'admin', says: 'everything but owners' },
  { role: 'agent', says: 'conversations and customers; reads the knowledge base' },
  { role: 'viewer', says: 'reads everything, changes nothing' },
];
/** Only an owner grants or takes `owner` (docs/console.md); the API says so too. */
const grantable = (me: Role) => ROLES.filter((r) => me === 'owner' || r.role !== 'owner');

type Open = { kind: 'invite' } | { kind: 'remove'; user: User } | { kind: 'link'; user: User } | { kind: 'totp'; user: User } | null;

export function PeoplePage({ session }: { session: Session }) {
  if (!managesWorkspace(session.user.role)) return <NotAllowed title="People" why="Only owners and admins manage the workspace's people." />;
  return <People me={session.user} />;
}

function People({ me }: { me: Session['user'] }) {
  const users = useUsers();
  const [open, setOpen] = useState<Open>(null);
  const close = () => setOpen(null);
  return (
    <Page
      title="People"
      actions={
        <button type="button" className="button primary" onClick={() => setOpen({ kind: 'invite' })}>
          Invite someone
        </button>
      }
    >
      <p className="lead">Who can sign in to this workspace, and what their role lets them do.</p>
      {users.isPending ? (
        <Loading what="people" />
      ) : users.isError ? (
        <ErrorAlert error={users.error} />
      ) : (
        <DataTable
          label="People"
          rows={users.data.users}
          rowKey={(user) => user.id}
          columns={[
            {
              header: 'Name',
              rowHeader: true,
              cell: (user) => (
                <>
                  {user.name || '—'}
                  {user.id === me.id ? <span className="muted"> (you)</span> : null}
                </>
              ),
            },
            { header: 'Email', className: 'wrap-anywhere', cell: (user) => user.email },
            { header: 'Role', cell: (user) => <RoleSelect user={user} me={me} /> },
            { header: 'Status', cell: (user) => (user.status === 'invited' ? <span className="tag">Invited</span> : 'Active') },
            { header: 'Last sign-in', cell: (user) => when(user.last_sign_in_at) },
            {
              header: 'Actions',
              hideHeader: true,
              cell: (user) => (
                <div className="row-actions">
                  <button type="button" className="button small" onClick={() => setOpen({ kind: 'link', user })} aria-label={`${user.status === 'invited' ? 'New invitation link' : 'Password reset link'} for ${user.email}`}>
                    {user.status === 'invited' ? 'New invitation link' : 'Reset link'}
                  </button>
                  {user.status === 'active' ? (
                    <button type="button" className="button small" onClick={() => setOpen({ kind: 'totp', user })} aria-label={`Reset two-step sign-in of ${user.email}`}>
                      Reset two-step
                    </button>
                  ) : null}
                  {user.id !== me.id ? (
                    <button type="button" className="button small danger" onClick={() => setOpen({ kind: 'remove', user })} aria-label={`Remove ${user.email}`}>
                      Remove
                    </button>
                  ) : null}
                </div>
              ),
            },
          ]}
        />
      )}
      {open?.kind === 'invite' ? <InviteDialog me={me} onClose={close} /> : null}
      {open?.kind === 'remove' ? <RemoveDialog user={open.user} onClose={close} /> : null}
      {open?.kind === 'link' ? <LinkDialog user={open.user} onClose={close} /> : null}
      {open?.kind === 'totp' ? <ResetTotpDialog user={open.user} onClose={close} /> : null}
    </Page>
  );
}

/** The role, changed where it is shown; a refusal (the last owner) is announced and the list shows what the API holds. */
function RoleSelect({ user, me }: { user: User; me: Session['user'] }) {
  const change = useChangeRole();
  const announce = useAnnounce();
  const locked = user.role === 'owner' && me.role !== 'owner';
  const options = locked ? ROLES.filter((r) => r.role === 'owner') : grantable(me.role);
  return (
    <select
      className="select"
      aria-label={`Role of ${user.email}`}
      value={user.role}
      disabled={locked || change.isPending}
      onChange={(event) => {
        const role = event.target.value as Role;
        change.mutate(
          { id: user.id, role },
          { onSuccess: () => announce(`${user.email} is now ${role}.`), onError: (err) => announce(err instanceof Error ? `Role not changed: ${err.message}` : 'Role not changed.') },
        );
      }}
    >
      {options.map((r) => (
        <option key={r.role} value={r.role}>
          {r.role}
        </option>
      ))}
    </select>
  );
}

function InviteDialog({ me, onClose }: { me: Session['user']; onClose: () => void }) {
  const invite = useInvite();
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('agent');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    invite.mutate({ email: email.trim(), role });
  };
  if (invite.data) {
    return (
      <Dialog title={`${invite.data.user.email} is invited`} onClose={onClose}>
        <SecretOnce
          label="Invitation link"
          value={invite.data.link.url}
          note={`${invite.data.emailed ? 'It was emailed to them; here it is to pass on yourself too' : 'Send this link to them'}: it works once, until ${when(invite.data.link.expires_at)}.`}
        />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog title="Invite someone" onClose={onClose}>
      <form className="stack" onSubmit={submit}>
        <Field label="Email" type="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <fieldset className="scopes">
          <legend>Role</legend>
          {grantable(me.role).map((r) => (
            <label key={r.role} className="check">
              <input type="radio" name="role" value={r.role} checked={role === r.role} onChange={() => setRole(r.role)} />
              <span>
                <strong>{r.role}</strong> <span className="muted">{r.says}</span>
              </span>
            </label>
          ))}
        </fieldset>
        <ErrorAlert error={invite.error} />
        <div className="dialog-actions">
          <button type="button" className="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button primary" disabled={invite.isPending}>
            Send invitation
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function RemoveDialog({ user, onClose }: { user: User; onClose: () => void }) {
  const remove = useRemoveUser();
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title={`Remove ${user.email}?`}
      body={<p>They lose access at once: every session they have ends.</p>}
      confirm="Remove"
      danger
      busy={remove.isPending}
      error={remove.error}
      onConfirm={() =>
        remove.mutate(user.id, {
          onSuccess: () => {
            announce(`Removed ${user.email}.`);
            onClose();
          },
        })
      }
      onClose={onClose}
    />
  );
}

function ResetTotpDialog({ user, onClose }: { user: User; onClose: () => void }) {
  const reset = useResetTotp();
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title={`Reset two-step sign-in of ${user.email}?`}
      body={<p>Their authenticator app stops working here: they sign in with their password alone, and may set up two-step sign-in again (or must, if the workspace requires it).</p>}
      confirm="Reset"
      danger
      busy={reset.isPending}
      error={reset.error}
      onConfirm={() =>
        reset.mutate(user.id, {
          onSuccess: () => {
            announce(`Two-step sign-in of ${user.email} reset.`);
            onClose();
          },
        })
      }
      onClose={onClose}
    />
  );
}

function LinkDialog({ user, onClose }: { user: User; onClose: () => void }) {
  const issue = useIssueLink();
  const what = user.status === 'invited' ? 'invitation link' : 'password reset link';
  if (issue.data) {
    return (
      <Dialog title={`New ${what} for ${user.email}`} onClose={onClose}>
        <SecretOnce
          label={what[0].toUpperCase() + what.slice(1)}
          value={issue.data.link.url}
          note={`${issue.data.emailed ? 'It was emailed to them; here it is to pass on yourself too' : 'Send it to them'}: it works once, until ${when(issue.data.link.expires_at)}.`}
        />
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
      title={`Make a new ${what} for ${user.email}?`}
      body={<p>Whoever holds the link can set this account&apos;s password, once.</p>}
      confirm="Make link"
      busy={issue.isPending}
      error={issue.error}
      onConfirm={() => issue.mutate(user.id)}
      onClose={onClose}
    />
  );
}
