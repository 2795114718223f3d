import type { EntityManager } from '@mikro-orm/postgresql';
import { Secret, TOTP } from 'otpauth';
import { ConsoleUser, SignInPolicy, UserTotp, type IConsoleUser } from '../../db/entities';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { DomainError } from '../../lib/errors';
import { recordAudit, type AuditContext } from '../audit/audit-log';
import type { PeopleActor } from './users';

/** RFC 6238 as every authenticator app reads it: SHA-1, 6 digits, 30 s; a code of the step before or after is taken too (clock drift). */
const PERIOD = 30;
const WINDOW = 1;
const CODE = /^\d{6}$/;

/** What an enrolment shows, once: the otpauth:// URI (for a QR code or a link) and the secret as text. */
export interface TotpEnrolment {
  secret: string;
  otpauth_uri: string;
}

/** The second factor's check of a password sign-in (PeopleService calls it once the password matched). */
export type SecondFactorCheck = (user: IConsoleUser, code: string | undefined, ctx: Omit<AuditContext, 'actor'>) => Promise<void>;

const aad = (userId: string) => `totp:${userId}`;
const isCli = (a: PeopleActor): a is { cli: true } => 'cli' in a;

/**
 * TOTP as an optional second factor of password sign-in (otpauth): enrolled by a secret shown once and confirmed by a
 * first code, sealed at rest (bound to the user); each code is accepted once (the last step is kept). An owner may
 * require it for the workspace: a password sign-in of someone without it answers totp_enrolment_required with a new
 * secret, and the same sign-in with a first code enrols and signs in. An owner or admin resets a person's (audited).
 */
export class TotpService {
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
  ) {}

  async status(user: { id: string; workspaceId: string }): Promise<{ enrolled: boolean; required: boolean }> {
    const em = this.em.fork();
    const [row, required] = await Promise.all([em.findOne(UserTotp, { userId: user.id }), this.required(em, user.workspaceId)]);
    return { enrolled: Boolean(row?.confirmedAt), required };
  }

  /** A new secret for the signed-in user (replacing an unconfirmed one); 409 when one is confirmed already (reset first). */
  async begin(user: { id: string; email: string }): Promise<TotpEnrolment> {
    const em = this.em.fork();
    const row = await em.findOne(UserTotp, { userId: user.id });
    if (row?.confirmedAt) throw new DomainError('totp_already_enrolled', 'A second factor is enrolled already; an owner or admin can reset it');
    return this.newSecret(em, user);
  }

  /** The first code confirms the secret: from then on every password sign-in asks for a code. */
  async confirm(user: { id: string; email: string; workspaceId: string }, code: string, ctx: AuditContext): Promise<void> {
    const em = this.em.fork();
    const row = await em.findOne(UserTotp, { userId: user.id });
    if (row?.confirmedAt) throw new DomainError('totp_already_enrolled', 'A second factor is enrolled already');
    if (!row) throw new DomainError('invalid_request', 'code: start the enrolment first (POST /api/console/totp/enrol)');
    const step = this.accept(row.secretSealed, user.id, code, null);
    if (step === null) throw new DomainError('invalid_totp_code', 'code: not the current code of this secret');
    await em.transactional(async (tx) => {
      await tx.nativeUpdate(UserTotp, { userId: user.id }, { confirmedAt: new Date(), lastStep: step });
      await recordAudit(tx, ctx, { workspaceId: user.workspaceId, action: 'user.totp_enrolled', target: { type: 'user', id: user.id } });
    });
  }

  /** Recovery: an owner or admin removes a person's second factor (only an owner an owner's); audited. */
  async reset(actor: PeopleActor, workspaceId: string, userId: string, ctx: AuditContext): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const target = await em.findOne(ConsoleUser, { id: userId, workspaceId });
      if (!target) throw new DomainError('not_found', `No user with id '${userId}' in this workspace`);
      if (!isCli(actor) && target.role === 'owner' && actor.role !== 'owner') throw new DomainError('forbidden', "only an owner may reset an owner's second factor");
      const removed = await em.nativeDelete(UserTotp, { userId });
      if (removed === 0) throw new DomainError('not_found', 'This user has no second factor');
      await recordAudit(em, ctx, { workspaceId, action: 'user.totp_reset', target: { type: 'user', id: userId }, details: { email: target.email } });
    });
  }

  /** An owner requires (or stops requiring) a second factor at every password sign-in of the workspace. */
  async setRequired(workspaceId: string, required: boolean, ctx: AuditContext): Promise<{ required: boolean }> {
    await this.em.fork().transactional(async (em) => {
      await em.upsert(SignInPolicy, { workspaceId, totpRequired: required, updatedAt: new Date() });
      await recordAudit(em, ctx, { workspaceId, action: 'sign_in_policy.changed', target: { type: 'workspace', id: workspaceId }, details: { totp_required: required } });
    });
    return { required };
  }

  /**
   * The second factor of a password sign-in whose password matched: an enrolled user must send a valid, unused code
   * (401 second_factor_required, 401 invalid_totp_code); a user of a workspace that requires one and has none gets
   * 403 totp_enrolment_required with a secret, and the same sign-in with a first code of it enrols and passes.
   */
  readonly checkSignIn: SecondFactorCheck = async (user, code, ctx) => {
    const em = this.em.fork();
    const row = await em.findOne(UserTotp, { userId: user.id });
    const given = code?.replace(/\s+/g, '');
    if (row?.confirmedAt) {
      if (!given) throw new DomainError('second_factor_required', 'totp_code: this account has a second factor; send the code of your authenticator app');
      const step = this.accept(row.secretSealed, user.id, given, row.lastStep ?? null);
      // Conditional on the step: two sign-ins with the same code at once cannot both pass.
      if (step === null || (await em.nativeUpdate(UserTotp, { userId: user.id, $or: [{ lastStep: null }, { lastStep: { $lt: step } }] }, { lastStep: step })) === 0) {
        await recordAudit(em, { ...ctx, actor: { type: 'anonymous', email: user.email } }, { workspaceId: user.workspaceId, action: 'user.sign_in_failed', target: { type: 'user', id: user.id }, details: { reason: 'invalid_totp_code' } });
        throw new DomainError('invalid_totp_code', 'totp_code: not the current code, or already used');
      }
      return;
    }
    if (!(await this.required(em, user.workspaceId))) return;
    if (row && given) {
      const step = this.accept(row.secretSealed, user.id, given, null);
      if (step === null) throw new DomainError('invalid_totp_code', 'totp_code: not the current code of the secret you were given');
      await em.transactional(async (tx) => {
        await tx.nativeUpdate(UserTotp, { userId: user.id }, { confirmedAt: new Date(), lastStep: step });
        await recordAudit(tx, { ...ctx, actor: { type: 'user', id: user.id, email: user.email } }, { workspaceId: user.workspaceId, action: 'user.totp_enrolled', target: { type: 'user', id: user.id }, details: { at_sign_in: true } });
      });
      return;
    }
    // The secret being enrolled is shown to whoever knows the password until a code confirms it (it guards nothing yet).
    const enrolment = row ? this.enrolment(this.box.open(row.secretSealed, aad(user.id)), user.email) : await this.newSecret(em, user);
    throw new DomainError('totp_enrolment_required', 'This workspace requires a second factor: add the secret to an authenticator app, then sign in again with its code as totp_code', { enrolment });
  };

  private async required(em: EntityManager, workspaceId: string): Promise<boolean> {
    return (await em.findOne(SignInPolicy, { workspaceId }))?.totpRequired ?? false;
  }

  private async newSecret(em: EntityManager, user: { id: string; email: string }): Promise<TotpEnrolment> {
    const secret = new Secret({ size: 20 }).base32;
    await em.upsert(UserTotp, { userId: user.id, secretSealed: this.box.seal(secret, aad(user.id)), confirmedAt: null, lastStep: null, createdAt: new Date() });
    return this.enrolment(secret, user.email);
  }

  private enrolment(secret: string, email: string): TotpEnrolment {
    return { secret, otpauth_uri: totpOf(secret, email).toString() };
  }

  /** The time step `code` is valid for (within the window, after `lastStep`), or null. */
  private accept(sealed: string, userId: string, code: string, lastStep: number | null): number | null {
    if (!CODE.test(code)) return null;
    const totp = totpOf(this.box.open(sealed, aad(userId)), '');
    const delta = totp.validate({ token: code, window: WINDOW });
    if (delta === null) return null;
    const step = Math.floor(Date.now() / 1000 / PERIOD) + delta;
    return lastStep !== null && step <= lastStep ? null : step;
  }
}

function totpOf(secret: string, email: string): TOTP {
  return new TOTP({ issuer: 'Concierge', label: email, algorithm: 'SHA1', digits: 6, period: PERIOD, secret: Secret.fromBase32(secret) });
}
