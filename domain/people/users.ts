import { LockMode, UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { ConsoleUser, type ConsoleRole, type IConsoleUser, type LinkKind } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { recordAudit, type AuditContext } from '../audit/audit-log';
import type { Mailer } from '../ports/mailer';
import { WorkspaceRepository } from '../workspaces/repository';
import type { IssuedLink, LinkService } from './links';
import { checkPasswordStrength, dummyVerify, hashPassword, verifyPassword } from './passwords';
import type { NewSession, SessionPrincipal, SessionService } from './sessions';
import type { SecondFactorCheck } from './totp';

export interface UserView {
  id: string;
  email: string;
  name: string | null;
  role: ConsoleRole;
  /** `invited`: has not set a password yet; `active`: signs in. */
  status: 'invited' | 'active';
  created_at: string;
  last_sign_in_at: string | null;
}

export interface SignedIn {
  user: UserView;
  workspace: { id: string; name: string };
  session: NewSession;
}

/** The limits of sign-in (api/ builds it from lib/ratelimit's console limits): per address, and the account lockout. */
export interface SignInGuard {
  /** Counts one attempt from `address`; 429 rate_limited when the address is over its budget or (sign-in) `email` is locked. */
  admit(address: string, email?: string): Promise<void>;
  failed(email: string): Promise<void>;
  succeeded(email: string): Promise<void>;
}

/** Who acts on people: a signed-in user (the console) or the admin CLI (no user: every right, as the server's operator). */
export type PeopleActor = Pick<SessionPrincipal, 'id' | 'role' | 'workspaceId'> | { cli: true };

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,253}$/;

export function normaliseEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (!EMAIL.test(email) || email.length > 254) throw new DomainError('invalid_request', 'email: not an email address');
  return email;
}

function view(u: IConsoleUser): UserView {
  return {
    id: u.id,
    email: u.email,
    name: u.name ?? null,
    role: u.role,
    status: u.status,
    created_at: u.createdAt.toISOString(),
    last_sign_in_at: u.lastSignInAt ? u.lastSignInAt.toISOString() : null,
  };
}

const isCli = (a: PeopleActor): a is { cli: true } => 'cli' in a;
const forbidden = (message: string) => new DomainError('forbidden', message);

/**
 * The console's people: users of a workspace with a role, their sign-in by email and password, one-time links
 * (sign-in for a first owner, invitations, password resets) and the acts the audit log records. Only an owner grants
 * or takes `owner`; the workspace's last active owner can be neither removed nor demoted (409 last_owner), checked
 * under a lock on the workspace's owners so two concurrent demotions cannot both pass.
 */
export class PeopleService {
  constructor(
    private readonly em: EntityManager,
    private readonly sessions: SessionService,
    private readonly links: LinkService,
    private readonly opts: { mailer?: Mailer | null; log?: Pick<Logger, 'warn'>; workspaces?: Pick<WorkspaceRepository, 'findWorkspace'>; secondFactor?: SecondFactorCheck } = {},
  ) {}

  private get workspaces() {
    return this.opts.workspaces ?? new WorkspaceRepository();
  }

  async list(workspaceId: string): Promise<{ users: UserView[] }> {
    const rows = await this.em.fork().find(ConsoleUser, { workspaceId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return { users: rows.map(view) };
  }

  async get(workspaceId: string, id: string): Promise<UserView> {
    const row = await this.em.fork().findOne(ConsoleUser, { id, workspaceId });
    if (!row) throw new DomainError('not_found', `No user with id '${id}' in this workspace`);
    return view(row);
  }

  async workspaceOf(workspaceId: string): Promise<{ id: string; name: string }> {
    return (await this.workspaces.findWorkspace(this.em.fork(), workspaceId)) ?? { id: workspaceId, name: '' };
  }

  async count(workspaceId: string): Promise<number> {
    return this.em.fork().count(ConsoleUser, { workspaceId });
  }

  /**
   * A new user with a one-time link: `invitation` from the console (mailed when SMTP is set up, and returned to the
   * inviter either way), `sign_in` from the CLI's `user create` and `npm start`'s first owner (printed).
   */
  async create(
    actor: PeopleActor,
    workspaceId: string,
    input: { email: string; name?: string | null; role: ConsoleRole },
    ctx: AuditContext,
    kind: Extract<LinkKind, 'sign_in' | 'invitation'>,
  ): Promise<{ user: UserView; link: IssuedLink; emailed: boolean }> {
    const email = normaliseEmail(input.email);
    if (!isCli(actor)) {
      if (actor.workspaceId !== workspaceId) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
      if (input.role === 'owner' && actor.role !== 'owner') throw forbidden('role: only an owner may make someone an owner');
    }
    const em = this.em.fork();
    const workspace = await this.workspaces.findWorkspace(em, workspaceId);
    if (!workspace) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
    const id = newId('usr');
    let link: IssuedLink;
    try {
      link = await em.transactional(async (tx) => {
        await tx.insert(ConsoleUser, { id, workspaceId, email, name: input.name?.trim() || null, role: input.role, status: 'invited', passwordHash: null });
        const issued = await this.links.issue(tx, kind, { id, workspaceId });
        await recordAudit(tx, ctx, { workspaceId, action: kind === 'invitation' ? 'user.invited' : 'user.created', target: { type: 'user', id }, details: { email, role: input.role } });
        return issued;
      });
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new DomainError('email_taken', `email: '${email}' is already a user of this workspace`);
      throw err;
    }
    const user = await this.get(workspaceId, id);
    const emailed = kind === 'invitation' ? await this.mail(email, `You are invited to ${workspace.name} on Concierge`, invitationText(workspace.name, input.role, link)) : false;
    return { user, link, emailed };
  }

  /**
   * A fresh install's claim (npm start): while the workspace has no active user, a one-time sign-in link (24 h) for its
   * first owner — made as `email` when the workspace has no user at all, else the invited owner who has not claimed it
   * yet (a new link each start; the previous one stops working). Null once someone has signed in.
   */
  async claimLink(workspaceId: string, email: string, ctx: AuditContext): Promise<{ user: UserView; link: IssuedLink } | null> {
    const em = this.em.fork();
    const users = await em.find(ConsoleUser, { workspaceId }, { orderBy: { createdAt: 'asc' } });
    if (users.some((u) => u.status === 'active')) return null;
    const owner = users.find((u) => u.role === 'owner');
    if (!owner) {
      if (users.length > 0) return null;
      const made = await this.create({ cli: true }, workspaceId, { email, role: 'owner' }, ctx, 'sign_in');
      return { user: made.user, link: made.link };
    }
    const { link } = await this.issueLink({ cli: true }, workspaceId, owner.id, ctx);
    return { user: view(owner), link };
  }

  /** Changes a user's role; only an owner grants or takes `owner`; never the last active owner's. */
  async changeRole(actor: PeopleActor, workspaceId: string, id: string, role: ConsoleRole, ctx: AuditContext): Promise<UserView> {
    return this.em.fork().transactional(async (em) => {
      const { target, owners } = await this.lockTarget(em, workspaceId, id);
      if (target.role === role) return view(target);
      if (!isCli(actor) && (target.role === 'owner' || role === 'owner') && actor.role !== 'owner') throw forbidden('role: only an owner may grant or take the owner role');
      if (target.role === 'owner' && target.status === 'active' && owners <= 1) throw new DomainError('last_owner', "role: this is the workspace's last owner; make someone else owner first");
      const from = target.role;
      target.role = role;
      await em.flush();
      await recordAudit(em, ctx, { workspaceId, action: 'user.role_changed', target: { type: 'user', id }, details: { email: target.email, from, to: role } });
      return view(target);
    });
  }

  /** Removes a user (their sessions and links go with the row); never the last active owner; only an owner removes an owner. */
  async remove(actor: PeopleActor, workspaceId: string, id: string, ctx: AuditContext): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const { target, owners } = await this.lockTarget(em, workspaceId, id);
      if (!isCli(actor) && target.role === 'owner' && actor.role !== 'owner') throw forbidden('only an owner may remove an owner');
      if (target.role === 'owner' && target.status === 'active' && owners <= 1) throw new DomainError('last_owner', "this is the workspace's last owner; make someone else owner first");
      await em.nativeDelete(ConsoleUser, { id: target.id });
      await recordAudit(em, ctx, { workspaceId, action: 'user.removed', target: { type: 'user', id }, details: { email: target.email, role: target.role } });
    });
  }

  /** The workspace's active owners locked (first, always in the same order), then the target: a consistent count. */
  private async lockTarget(em: EntityManager, workspaceId: string, id: string): Promise<{ target: IConsoleUser; owners: number }> {
    const owners = await em.find(ConsoleUser, { workspaceId, role: 'owner', status: 'active' }, { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } });
    const target = await em.findOne(ConsoleUser, { id, workspaceId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!target) throw new DomainError('not_found', `No user with id '${id}' in this workspace`);
    return { target, owners: owners.length };
  }

  /**
   * Email and password. An unknown email and a wrong password answer the same 401 invalid_credentials, and both
   * verify one argon2 hash (a dummy one for an unknown email), so neither the answer nor its time tells them apart.
   */
  async signIn(input: { email: string; password: string; workspace_id?: string; totp_code?: string }, ctx: Omit<AuditContext, 'actor'>, guard: SignInGuard): Promise<SignedIn> {
    const email = input.email.trim().toLowerCase();
    await guard.admit(ctx.ip ?? 'unknown', email);
    const em = this.em.fork();
    const candidates = await em.find(ConsoleUser, { email, status: 'active', ...(input.workspace_id ? { workspaceId: input.workspace_id } : {}) }, { orderBy: { createdAt: 'asc' }, limit: 10 });
    const matched: IConsoleUser[] = [];
    // One argon2 verify whatever the email: also for accounts without a password yet (invited, or made by SSO).
    if (!candidates.some((c) => c.passwordHash)) await dummyVerify(input.password);
    for (const c of candidates) if (c.passwordHash && (await verifyPassword(c.passwordHash, input.password))) matched.push(c);
    if (matched.length === 0) {
      await guard.failed(email);
      const only = candidates.length === 1 ? candidates[0] : null;
      await recordAudit(em, { ...ctx, actor: { type: 'anonymous', email: email.slice(0, 254) } }, {
        workspaceId: only?.workspaceId ?? null,
        action: 'user.sign_in_failed',
        target: only ? { type: 'user', id: only.id } : null,
      });
      throw new DomainError('invalid_credentials', 'email or password: not recognised');
    }
    if (matched.length > 1) {
      const workspaces = await Promise.all(matched.map((m) => this.workspaces.findWorkspace(em, m.workspaceId)));
      throw new DomainError('workspace_required', 'workspace_id: this email and password open several workspaces; name one', { workspaces: workspaces.filter(Boolean) });
    }
    // The password matched: the second factor, when the account has one or the workspace requires one (domain/people/totp.ts).
    try {
      await this.opts.secondFactor?.(matched[0], input.totp_code, ctx);
    } catch (err) {
      if (err instanceof DomainError && err.code === 'invalid_totp_code') await guard.failed(email);
      throw err;
    }
    await guard.succeeded(email);
    return this.startSession(matched[0], ctx, 'user.signed_in');
  }

  /** A new session for the user, in one transaction with its last sign-in time and the audit record. */
  private async startSession(user: IConsoleUser, ctx: Omit<AuditContext, 'actor'>, action: 'user.signed_in' | 'user.invitation_accepted' | 'user.password_reset_completed', before?: (em: EntityManager) => Promise<void>): Promise<SignedIn> {
    const em = this.em.fork();
    const session = await em.transactional(async (tx) => {
      await before?.(tx);
      const now = new Date();
      await tx.nativeUpdate(ConsoleUser, { id: user.id }, { lastSignInAt: now });
      const made = await this.sessions.create(tx, user, ctx);
      await recordAudit(tx, { ...ctx, actor: { type: 'user', id: user.id, email: user.email } }, { workspaceId: user.workspaceId, action, target: { type: 'user', id: user.id } });
      return made;
    });
    const workspace = (await this.workspaces.findWorkspace(em, user.workspaceId)) ?? { id: user.workspaceId, name: '' };
    return { user: await this.get(user.workspaceId, user.id), workspace, session };
  }

  /** Ends every session of the signed-in user, this one included. */
  async signOutEverywhere(p: Pick<SessionPrincipal, 'id' | 'email' | 'workspaceId'>, ctx: Omit<AuditContext, 'actor'>): Promise<number> {
    return this.em.fork().transactional(async (em) => {
      const n = await this.sessions.revokeAllOf(em, p.id);
      await recordAudit(em, { ...ctx, actor: { type: 'user', id: p.id, email: p.email } }, { workspaceId: p.workspaceId, action: 'user.signed_out_everywhere', target: { type: 'user', id: p.id }, details: { sessions: n } });
      return n;
    });
  }

  /**
   * A password-reset link for the email's active users, mailed (never returned: the caller answers 202 whatever the
   * email). Without SMTP nothing is sent; an owner or admin can still issue a user a link (issueLink).
   */
  async requestPasswordReset(rawEmail: string, ctx: Omit<AuditContext, 'actor'>, guard: Pick<SignInGuard, 'admit'>): Promise<void> {
    const email = rawEmail.trim().toLowerCase();
    // Per address only: a locked account may still ask for a reset (the lockout is what it is for).
    await guard.admit(ctx.ip ?? 'unknown');
    const em = this.em.fork();
    const users = await em.find(ConsoleUser, { email, status: 'active' }, { limit: 10 });
    for (const user of users) {
      const link = await em.transactional(async (tx) => {
        await this.links.retire(tx, user.id, 'password_reset');
        const issued = await this.links.issue(tx, 'password_reset', user);
        await recordAudit(tx, { ...ctx, actor: { type: 'anonymous', email } }, { workspaceId: user.workspaceId, action: 'user.password_reset_requested', target: { type: 'user', id: user.id } });
        return issued;
      });
      // Not awaited: the answer must not take longer when the email is known.
      void this.mail(email, 'Reset your Concierge password', resetText(link));
    }
  }

  /** A new link for a user, from an owner or admin: an invitation while they have no password, else a password reset. */
  async issueLink(actor: PeopleActor, workspaceId: string, id: string, ctx: AuditContext): Promise<{ link: IssuedLink; emailed: boolean }> {
    const em = this.em.fork();
    const target = await em.findOne(ConsoleUser, { id, workspaceId });
    if (!target) throw new DomainError('not_found', `No user with id '${id}' in this workspace`);
    if (!isCli(actor) && target.role === 'owner' && actor.role !== 'owner' && actor.id !== target.id) throw forbidden("only an owner may issue an owner's link");
    const kind: LinkKind = target.status === 'invited' ? (isCli(actor) ? 'sign_in' : 'invitation') : 'password_reset';
    const link = await em.transactional(async (tx) => {
      await this.links.retire(tx, target.id, kind);
      const issued = await this.links.issue(tx, kind, target);
      await recordAudit(tx, ctx, { workspaceId, action: kind === 'password_reset' ? 'user.password_reset_requested' : 'user.sign_in_link_issued', target: { type: 'user', id }, details: { email: target.email, kind } });
      return issued;
    });
    const emailed = kind === 'sign_in' ? false : await this.mail(target.email, kind === 'password_reset' ? 'Reset your Concierge password' : 'Your Concierge invitation', kind === 'password_reset' ? resetText(link) : invitationText('your workspace', target.role, link));
    return { link, emailed };
  }

  /** What a link is for, so the console shows the right form (it is not consumed). */
  async inspectLink(token: string): Promise<{ kind: LinkKind; email: string; name: string | null; workspace: { id: string; name: string }; expires_at: string; password_set: boolean }> {
    const em = this.em.fork();
    const link = await this.links.peek(em, token);
    const user = await em.findOne(ConsoleUser, { id: link.userId });
    if (!user) throw new DomainError('link_expired', 'token: the user this link was for has been removed');
    const workspace = (await this.workspaces.findWorkspace(em, user.workspaceId)) ?? { id: user.workspaceId, name: '' };
    return { kind: link.kind, email: user.email, name: user.name ?? null, workspace, expires_at: link.expiresAt.toISOString(), password_set: Boolean(user.passwordHash) };
  }

  /**
   * Redeems a link (once): sets the password (checked first, so a weak one does not spend the link), activates an
   * invited user, and signs in with a new session. A password reset also ends every other session of the user.
   */
  async redeemLink(token: string, input: { password: string; name?: string | null; totp_code?: string }, ctx: Omit<AuditContext, 'actor'>, guard: Pick<SignInGuard, 'admit'>): Promise<SignedIn> {
    await guard.admit(ctx.ip ?? 'unknown');
    const em = this.em.fork();
    const peeked = await this.links.peek(em, token);
    const user = await em.findOne(ConsoleUser, { id: peeked.userId });
    if (!user) throw new DomainError('link_expired', 'token: the user this link was for has been removed');
    checkPasswordStrength(input.password, user.email);
    // A mailed reset link is no way around the second factor: it asks for the code as a sign-in does (before the link is used).
    if (peeked.kind === 'password_reset') await this.opts.secondFactor?.(user, input.totp_code, ctx);
    const passwordHash = await hashPassword(input.password);
    const action = peeked.kind === 'password_reset' ? 'user.password_reset_completed' : peeked.kind === 'invitation' ? 'user.invitation_accepted' : 'user.signed_in';
    return this.startSession(user, ctx, action, async (tx) => {
      await this.links.consume(tx, token);
      if (peeked.kind === 'password_reset') await this.sessions.revokeAllOf(tx, user.id);
      const name = input.name?.trim();
      await tx.nativeUpdate(ConsoleUser, { id: user.id }, { passwordHash, passwordChangedAt: new Date(), status: 'active', ...(name ? { name } : {}) });
    });
  }

  /** Sends a mail when SMTP is set up; false (and a warning) when it is not, or the server refused it. */
  private async mail(to: string, subject: string, text: string): Promise<boolean> {
    const mailer = this.opts.mailer;
    if (!mailer) return false;
    try {
      await mailer.send({ to, subject, text });
      return true;
    } catch (err) {
      this.opts.log?.warn({ err: (err as Error).message }, 'console: a mail was not sent');
      return false;
    }
  }
}

function invitationText(workspace: string, role: string, link: IssuedLink): string {
  return `You are invited to ${workspace} on Concierge as ${role}.\n\nChoose your password and sign in here (the link works once, until ${link.expires_at}):\n\n${link.url}\n`;
}

function resetText(link: IssuedLink): string {
  return `Someone asked to reset the password of this address on Concierge.\n\nChoose a new password here (the link works once, for an hour, until ${link.expires_at}):\n\n${link.url}\n\nIf it was not you, ignore this mail: your password is unchanged.\n`;
}
