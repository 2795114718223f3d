import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { ConsoleUser, SsoDomain, SsoSettings, UserIdentity, type IConsoleUser, type ISsoSettings } from '../../db/entities';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { DomainError } from '../../lib/errors';
import { newId } from '../../lib/ids';
import { pinnedFetch } from '../../lib/net/pinned-fetch';
import { checkProviderUrl, systemResolver, UnsafeUrlError, type AddressPolicy, type Resolver } from '../../lib/net/ssrf';
import { recordAudit, wasRemoved, type AuditContext } from '../audit/audit-log';
import type { SessionService } from './sessions';
import { normaliseEmail, type PeopleService, type SignedIn } from './users';

type Oidc = typeof import('openid-client');
type OidcConfiguration = InstanceType<Oidc['Configuration']>;

/** openid-client 6 is ESM-only: loaded at the first SSO request, not with the module (most processes never use it). */
let oidcModule: Promise<Oidc> | null = null;
const loadOidc = () => (oidcModule ??= import('openid-client'));

/** What a new person becomes at their first SSO sign-in: never owner (an owner is made by an owner). */
export const SSO_DEFAULT_ROLES = ['admin', 'agent', 'viewer'] as const;
export type SsoDefaultRole = (typeof SSO_DEFAULT_ROLES)[number];

/** The associated data of a sealed sign-in in progress (the flow cookie): it opens as nothing else. */
export const SSO_FLOW_AAD = 'concierge sso flow v1';
/** A sign-in at the IdP must come back within this long. */
export const SSO_FLOW_TTL_MS = 10 * 60_000;
/** Discovery documents, JWKS, token and userinfo answers are small: anything bigger is refused. */
const MAX_IDP_RESPONSE_BYTES = 512 * 1024;
/** Discovery is reused this long per settings version (the settings' updated_at names it). */
const DISCOVERY_TTL_MS = 10 * 60_000;
const MAX_DOMAINS = 20;
const DOMAIN = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;

/** Why an SSO sign-in did not end in a session: the code the console's sign-in page shows (`?error=<code>`). */
export type SsoFailure =
  /** No SSO for this address (unknown domain, or SSO disabled): the same answer for both. */
  | 'sso_unavailable'
  /** The sign-in could not be completed: no flow in this browser, state, nonce, PKCE or a token check failed, the IdP refused or is unreachable. */
  | 'sso_failed'
  /** The sign-in took longer than SSO_FLOW_TTL_MS. */
  | 'sso_expired'
  /** The IdP does not say the email is verified. */
  | 'sso_email_unverified'
  /** The email's domain is not one this workspace's SSO serves (or the identity belongs to another workspace). */
  | 'sso_email_domain'
  /** The workspace's user with this email is bound to another identity of this IdP. */
  | 'sso_account_conflict'
  /** The person was removed from the workspace: an owner or admin must invite them again. */
  | 'sso_user_removed'
  /** Too many sign-in attempts from this address. */
  | 'rate_limited';

export class SsoError extends Error {
  constructor(
    readonly code: SsoFailure,
    message: string,
  ) {
    super(message);
    this.name = 'SsoError';
  }
}

export interface SsoSettingsView {
  issuer: string;
  client_id: string;
  client_secret_last4: string;
  email_domains: string[];
  default_role: SsoDefaultRole;
  enabled: boolean;
  /** What to register at the IdP as the client's redirect URI. */
  redirect_uri: string;
  updated_at: string;
}

export interface SsoSettingsInput {
  issuer: string;
  client_id: string;
  /** Required the first time; absent afterwards: the stored one is kept. */
  client_secret?: string;
  email_domains: string[];
  default_role: SsoDefaultRole;
  enabled: boolean;
}

/** How the service reaches identity providers: the SSRF policy of every provider URL, a resolver and CAs for tests. */
export interface SsoNetwork {
  policy: AddressPolicy;
  resolve?: Resolver;
  ca?: string | Buffer | Array<string | Buffer>;
  /** Each request to the IdP (discovery, token, JWKS, userinfo). */
  timeoutMs: number;
}

/** A sign-in in progress, sealed into the browser's flow cookie: never readable nor forgeable by the browser. */
interface Flow {
  /** workspace */
  w: string;
  state: string;
  nonce: string;
  /** PKCE code verifier */
  v: string;
  /** the issuer the flow started at */
  i: string;
  /** expiry, ms since the epoch */
  exp: number;
}

const invalid = (message: string) => new DomainError('invalid_request', message);

/**
 * OpenID Connect sign-in per workspace (openid-client 6): an owner sets the IdP (issuer, client, the email domains it
 * serves, the default role); a person starts with their email, whose domain names the workspace, and is sent to the
 * IdP with PKCE (S256), state and nonce; back at the callback the code is exchanged and the ID token checked (issuer,
 * audience, nonce, expiry: the library), only `email_verified: true` identities are taken, and users are bound by
 * (issuer, subject), never by email alone after the first binding. Every request to the IdP goes through the
 * provider-URL SSRF check and a fetch pinned to the checked addresses, bounded in time and bytes.
 */
export class SsoService {
  private readonly discovered = new Map<string, { config: Promise<OidcConfiguration>; at: number }>();

  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly sessions: SessionService,
    private readonly people: Pick<PeopleService, 'get' | 'workspaceOf'>,
    private readonly net: SsoNetwork,
    private readonly publicBaseUrl: string,
    private readonly log?: Pick<Logger, 'warn'>,
  ) {}

  /** The callback the IdP redirects to: registered at the IdP as the client's redirect URI. */
  get redirectUri(): string {
    return new URL('/api/console/sso/callback', this.publicBaseUrl).href;
  }

  async get(workspaceId: string): Promise<SsoSettingsView | null> {
    const em = this.em.fork();
    const row = await em.findOne(SsoSettings, { workspaceId });
    return row ? this.view(row, await this.domainsOf(em, workspaceId)) : null;
  }

  /** Sets the workspace's SSO (audited as sso.settings_changed, without the secret). */
  async put(workspaceId: string, input: SsoSettingsInput, ctx: AuditContext): Promise<SsoSettingsView> {
    const issuer = await this.checkIssuer(input.issuer);
    const domains = normaliseDomains(input.email_domains);
    const clientId = input.client_id.trim();
    if (!clientId) throw invalid('client_id: empty');
    const secret = input.client_secret;
    try {
      return await this.em.fork().transactional(async (em) => {
        const row = await em.findOne(SsoSettings, { workspaceId });
        if (!row && !secret) throw invalid('client_secret: required when SSO is first set up');
        const sealed = secret ? { clientSecretSealed: this.box.seal(secret, workspaceId), clientSecretLast4: secret.slice(-4) } : {};
        const fields = { issuer, clientId, defaultRole: input.default_role, enabled: input.enabled, ...sealed };
        if (row) em.assign(row, { ...fields, updatedAt: new Date() });
        else em.create(SsoSettings, { workspaceId, ...fields, clientSecretSealed: sealed.clientSecretSealed!, clientSecretLast4: sealed.clientSecretLast4! });
        await em.flush();
        await em.nativeDelete(SsoDomain, { workspaceId });
        for (const domain of domains) await em.insert(SsoDomain, { domain, workspaceId });
        await recordAudit(em, ctx, {
          workspaceId,
          action: 'sso.settings_changed',
          target: { type: 'workspace', id: workspaceId },
          details: { issuer, client_id: clientId, email_domains: domains, default_role: input.default_role, enabled: input.enabled, client_secret_changed: Boolean(secret), ...(row ? {} : { created: true }) },
        });
        const saved = await em.findOneOrFail(SsoSettings, { workspaceId }, { refresh: true });
        return this.view(saved, domains);
      });
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new DomainError('sso_domain_taken', 'email_domains: a domain is already served by another workspace’s SSO (a domain belongs to one workspace only)');
      throw err;
    }
  }

  /** Removes the workspace's SSO and its domains (bindings stay: the same IdP set up again finds its people). */
  async remove(workspaceId: string, ctx: AuditContext): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const removed = await em.nativeDelete(SsoSettings, { workspaceId });
      if (removed === 0) throw new DomainError('not_found', 'No SSO is set up for this workspace');
      await recordAudit(em, ctx, { workspaceId, action: 'sso.settings_changed', target: { type: 'workspace', id: workspaceId }, details: { deleted: true } });
    });
  }

  /**
   * The start of a sign-in: the workspace whose SSO serves the email's domain, and the IdP's authorization URL with
   * PKCE (S256), state and nonce; `flow` is the sealed sign-in in progress, for the browser's flow cookie. An unknown
   * domain and a disabled SSO answer the same sso_unavailable.
   */
  async start(rawEmail: string): Promise<{ authorizationUrl: string; flow: string }> {
    let email: string;
    try {
      email = normaliseEmail(rawEmail);
    } catch {
      throw new SsoError('sso_unavailable', 'not an email address');
    }
    const em = this.em.fork();
    const mapped = await em.findOne(SsoDomain, { domain: email.slice(email.lastIndexOf('@') + 1) });
    const settings = mapped ? await em.findOne(SsoSettings, { workspaceId: mapped.workspaceId }) : null;
    if (!settings?.enabled) throw new SsoError('sso_unavailable', 'no SSO serves this address');
    const oidc = await loadOidc();
    const config = await this.configuration(settings);
    const flow: Flow = { w: settings.workspaceId, state: oidc.randomState(), nonce: oidc.randomNonce(), v: oidc.randomPKCECodeVerifier(), i: settings.issuer, exp: Date.now() + SSO_FLOW_TTL_MS };
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUri,
      scope: 'openid email',
      response_type: 'code',
      code_challenge: await oidc.calculatePKCECodeChallenge(flow.v),
      code_challenge_method: 'S256',
      state: flow.state,
      nonce: flow.nonce,
      login_hint: email,
    });
    return { authorizationUrl: url.href, flow: this.box.seal(JSON.stringify(flow), SSO_FLOW_AAD) };
  }

  /**
   * The IdP's redirect back: the code exchanged with the flow's PKCE verifier, state and nonce checked, the ID token
   * verified; then the person: an existing binding of (issuer, subject) signs that user in; without one, a user of the
   * workspace with the same email and no binding for this issuer is bound, else a new user is made with the default
   * role. A new session exactly as a password sign-in makes one (audited as user.signed_in, method sso).
   */
  async callback(sealedFlow: string | undefined, callbackUrl: URL, ctx: Omit<AuditContext, 'actor'>): Promise<SignedIn> {
    const flow = this.openFlow(sealedFlow);
    const em = this.em.fork();
    const settings = await em.findOne(SsoSettings, { workspaceId: flow.w });
    if (!settings?.enabled || settings.issuer !== flow.i) throw new SsoError('sso_unavailable', 'SSO was changed or disabled during the sign-in');
    const oidc = await loadOidc();
    const config = await this.configuration(settings);
    const issuer = config.serverMetadata().issuer;
    let subject: string;
    let claims: { email?: unknown; email_verified?: unknown };
    try {
      const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, { pkceCodeVerifier: flow.v, expectedState: flow.state, expectedNonce: flow.nonce, idTokenExpected: true });
      const idToken = tokens.claims();
      if (!idToken) throw new Error('no ID token');
      subject = idToken.sub;
      claims = idToken as { email?: unknown; email_verified?: unknown };
      // Claims an IdP keeps out of the ID token are asked of userinfo, for the same subject (the library checks it).
      if (claims.email === undefined && tokens.access_token) claims = await oidc.fetchUserInfo(config, tokens.access_token, subject);
    } catch (err) {
      this.log?.warn({ workspaceId: flow.w, err: errorText(err) }, 'console: an SSO sign-in was refused');
      throw await this.failed(flow.w, 'sso_failed', `the sign-in could not be completed: ${errorText(err)}`, ctx);
    }
    const failed = (code: SsoFailure, message: string, email?: string) => this.failed(flow.w, code, message, ctx, email);
    if (typeof claims.email !== 'string') throw await failed('sso_email_unverified', 'the identity provider gave no email');
    const rawEmail = claims.email;
    if (claims.email_verified !== true) throw await failed('sso_email_unverified', 'the identity provider does not say the email is verified', rawEmail);
    let email: string;
    try {
      email = normaliseEmail(rawEmail);
    } catch {
      throw await failed('sso_email_unverified', 'the identity provider gave no usable email', rawEmail);
    }
    const mapped = await em.findOne(SsoDomain, { domain: email.slice(email.lastIndexOf('@') + 1) });
    if (mapped?.workspaceId !== flow.w) throw await failed('sso_email_domain', "the email's domain is not one this workspace's SSO serves", email);
    const user = await this.bind(flow.w, settings, issuer, subject, email, ctx).catch(async (err: unknown) => {
      if (err instanceof SsoError) throw await failed(err.code, err.message, email);
      throw err;
    });
    return this.startSession(user, issuer, ctx);
  }

  /** The user (issuer, subject) names, binding or making one as callback() says. */
  private async bind(workspaceId: string, settings: ISsoSettings, issuer: string, subject: string, email: string, ctx: Omit<AuditContext, 'actor'>): Promise<IConsoleUser> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const identity = await em.findOne(UserIdentity, { issuer, subject });
        if (identity) {
          const bound = await em.findOne(ConsoleUser, { id: identity.userId });
          if (!bound || bound.workspaceId !== workspaceId) throw new SsoError('sso_email_domain', 'this identity belongs to another workspace');
          await em.nativeUpdate(UserIdentity, { id: identity.id }, { lastUsedAt: new Date() });
          return bound;
        }
        let user = await em.findOne(ConsoleUser, { workspaceId, email });
        if (user) {
          if (await em.findOne(UserIdentity, { userId: user.id, issuer })) throw new SsoError('sso_account_conflict', 'this workspace’s user with this email is bound to another identity of this identity provider');
          // An invitation the IdP's verified email answers: the person is who it was sent to.
          if (user.status === 'invited') await em.nativeUpdate(ConsoleUser, { id: user.id }, { status: 'active' });
        } else {
          if (await wasRemoved(em, workspaceId, email)) throw new SsoError('sso_user_removed', 'this person was removed from the workspace; an owner or admin may invite them again');
          const id = newId('usr');
          await em.insert(ConsoleUser, { id, workspaceId, email, name: null, role: settings.defaultRole, status: 'active', passwordHash: null });
          await recordAudit(em, { ...ctx, actor: { type: 'user', id, email } }, { workspaceId, action: 'user.created', target: { type: 'user', id }, details: { email, role: settings.defaultRole, method: 'sso', issuer } });
          user = await em.findOneOrFail(ConsoleUser, { id });
        }
        await em.insert(UserIdentity, { id: newId('idn'), userId: user.id, workspaceId, issuer, subject, email, lastUsedAt: new Date() });
        return user;
      });
    } catch (err) {
      // Two first sign-ins at once: one binding wins, the other is refused rather than bound twice.
      if (err instanceof UniqueConstraintViolationException) throw new SsoError('sso_account_conflict', 'this identity or user was bound by another sign-in at the same time; sign in again');
      throw err;
    }
  }

  /** A new session, as a password sign-in makes one: last sign-in time, the session row, the audit record. */
  private async startSession(user: IConsoleUser, issuer: string, ctx: Omit<AuditContext, 'actor'>): Promise<SignedIn> {
    const session = await this.em.fork().transactional(async (tx) => {
      await tx.nativeUpdate(ConsoleUser, { id: user.id }, { lastSignInAt: new Date() });
      const made = await this.sessions.create(tx, user, ctx);
      await recordAudit(tx, { ...ctx, actor: { type: 'user', id: user.id, email: user.email } }, { workspaceId: user.workspaceId, action: 'user.signed_in', target: { type: 'user', id: user.id }, details: { method: 'sso', issuer } });
      return made;
    });
    const [view, workspace] = await Promise.all([this.people.get(user.workspaceId, user.id), this.people.workspaceOf(user.workspaceId)]);
    return { user: view, workspace, session };
  }

  /** A refused SSO sign-in, audited as user.sign_in_failed (method sso, the reason); returns the error to throw. */
  private async failed(workspaceId: string, code: SsoFailure, message: string, ctx: Omit<AuditContext, 'actor'>, email?: string): Promise<SsoError> {
    await recordAudit(this.em.fork(), { ...ctx, actor: { type: 'anonymous', ...(email ? { email: email.slice(0, 254) } : {}) } }, { workspaceId, action: 'user.sign_in_failed', details: { method: 'sso', reason: code } });
    return new SsoError(code, message);
  }

  private openFlow(sealed: string | undefined): Flow {
    let flow: Flow;
    try {
      if (!sealed) throw new Error('none');
      flow = JSON.parse(this.box.open(sealed, SSO_FLOW_AAD)) as Flow;
    } catch {
      throw new SsoError('sso_failed', 'no SSO sign-in was started in this browser (or it was started in another)');
    }
    if (!(flow.exp > Date.now())) throw new SsoError('sso_expired', 'the sign-in took too long; start again');
    return flow;
  }

  /** The IdP's configuration (discovery through the checked fetch), reused per settings version for a while. */
  private configuration(settings: ISsoSettings): Promise<OidcConfiguration> {
    const key = `${settings.workspaceId}\n${settings.updatedAt.getTime()}`;
    const cached = this.discovered.get(key);
    if (cached && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.config;
    for (const k of this.discovered.keys()) if (k.startsWith(`${settings.workspaceId}\n`)) this.discovered.delete(k);
    const config = this.discover(settings).catch((err: unknown) => {
      this.discovered.delete(key);
      this.log?.warn({ workspaceId: settings.workspaceId, err: errorText(err) }, 'console: SSO discovery failed');
      throw new SsoError('sso_failed', `the identity provider could not be reached: ${errorText(err)}`);
    });
    this.discovered.set(key, { config, at: Date.now() });
    return config;
  }

  private async discover(settings: ISsoSettings): Promise<OidcConfiguration> {
    const oidc = await loadOidc();
    const secret = this.box.open(settings.clientSecretSealed, settings.workspaceId);
    const issuer = new URL(settings.issuer);
    const timeout = Math.max(1, Math.ceil(this.net.timeoutMs / 1000));
    // Plain http only passes the checked fetch when every address of the host is in the operator's allow list.
    const execute = issuer.protocol === 'http:' ? [oidc.allowInsecureRequests] : [];
    const config = await oidc.discovery(issuer, settings.clientId, { client_secret: secret }, oidc.ClientSecretBasic(secret), { [oidc.customFetch]: this.fetch, timeout, execute });
    config.timeout = timeout;
    return config;
  }

  /** Every request to an IdP: the URL checked as a provider URL (SSRF policy), the connection pinned to the checked addresses, bounded. */
  private readonly fetch = async (url: string, init: { method?: string; headers?: Headers | Record<string, string>; body?: unknown; signal?: AbortSignal }): Promise<Response> => {
    const { addresses } = await checkProviderUrl(url, this.net.policy, this.net.resolve ?? systemResolver);
    const timeout = AbortSignal.timeout(this.net.timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    return pinnedFetch(addresses, { ca: this.net.ca, maxBytes: MAX_IDP_RESPONSE_BYTES })(url, { method: init.method, headers: init.headers, body: init.body as RequestInit['body'], signal });
  };

  private async checkIssuer(raw: string): Promise<string> {
    const trimmed = raw.trim();
    try {
      const { url } = await checkProviderUrl(trimmed, this.net.policy, this.net.resolve ?? systemResolver, { resolveNames: false });
      if (url.search || url.hash) throw new UnsafeUrlError('an issuer has no query or fragment');
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw invalid(`issuer: ${err.message}`);
      throw err;
    }
    return trimmed;
  }

  private async domainsOf(em: EntityManager, workspaceId: string): Promise<string[]> {
    return (await em.find(SsoDomain, { workspaceId }, { orderBy: { domain: 'asc' } })).map((d) => d.domain);
  }

  private view(row: ISsoSettings, domains: string[]): SsoSettingsView {
    return {
      issuer: row.issuer,
      client_id: row.clientId,
      client_secret_last4: row.clientSecretLast4,
      email_domains: [...domains].sort(),
      default_role: row.defaultRole,
      enabled: row.enabled,
      redirect_uri: this.redirectUri,
      updated_at: row.updatedAt.toISOString(),
    };
  }
}

function normaliseDomains(raw: string[]): string[] {
  const domains = [...new Set(raw.map((d) => d.trim().toLowerCase().replace(/^@/, '').replace(/\.$/, '')))];
  if (domains.length === 0) throw invalid('email_domains: at least one');
  if (domains.length > MAX_DOMAINS) throw invalid(`email_domains: at most ${MAX_DOMAINS}`);
  for (const d of domains) if (!DOMAIN.test(d)) throw invalid(`email_domains: '${d.slice(0, 100)}' is not a domain name`);
  return domains;
}

/** An error's message for a log line or a refusal (never a token: the libraries' messages name checks, not values). */
function errorText(err: unknown): string {
  const parts: string[] = [];
  // The libraries wrap what went wrong (a refused address, a body over the cap) as a cause: name it too.
  for (let e = err as { message?: string; code?: string; error?: string; cause?: unknown } | undefined, depth = 0; e && depth < 3; e = e.cause as typeof e, depth++) {
    parts.push([e.error ?? e.code, e.message].filter(Boolean).join(': '));
  }
  return parts.filter(Boolean).join('; cause: ').slice(0, 300) || 'unknown error';
}
