import { recordAudit, SYSTEM_CONTEXT, type AuditContext } from '../audit/audit-log';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ChatFrames } from '../chat/frames';
import type { Repositories } from '../repositories';
import { checkCommandList } from '../chat/page-commands';
import type { SealedSecrets, SecretBox } from '../../lib/crypto/secret-box';
import { Site, type ISite } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { checkAppearance, DEFAULT_APPEARANCE, type AppearancePatch, type SiteAppearance } from './appearance';

export interface SiteRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  allowed_origins: string[];
  status: 'active' | 'suspended';
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_expires_at: Date | null;
  /** The page commands the site's page handles (`ui:command`); empty: none are sent. */
  ui_commands: string[];
  /** The widget's look and language, defaults filled in (init's `appearance`). */
  appearance: SiteAppearance;
}

export type AuthLevel = 'anonymous' | 'self_asserted' | 'verified';

export interface UserContext {
  external_id?: string;
  user_hash?: string;
  phone?: string;
  email?: string;
}

function siteRow(s: ISite): SiteRow {
  return {
    id: s.id,
    workspace_id: s.workspaceId,
    agent_id: s.agentId,
    allowed_origins: s.allowedOrigins,
    status: s.status,
    secret_sealed: s.secretSealed,
    previous_secret_sealed: s.previousSecretSealed ?? null,
    previous_expires_at: s.previousExpiresAt ?? null,
    ui_commands: s.uiCommands ?? [],
    appearance: siteAppearance(s),
  };
}

/** The stored look, each unset (null) field its default. */
function siteAppearance(s: ISite): SiteAppearance {
  const d = DEFAULT_APPEARANCE;
  return {
    brand_color: s.brandColor ?? d.brand_color,
    position: s.launcherPosition ?? d.position,
    launcher_label: s.launcherLabel ?? d.launcher_label,
    theme: s.theme ?? d.theme,
    language: s.language ?? d.language,
  };
}

/** How long a rotated-out secret still verifies user_hash, by default. */
export const DEFAULT_ROTATION_GRACE_HOURS = 24;

/**
 * Restricts a site operation to one workspace (the console's): a site of another workspace is `not_found`, exactly
 * as an unknown id. The admin CLI passes none (the operator acts on the whole installation).
 */
export interface SiteScope {
  workspaceId?: string;
}

/** A site as the console lists it: never a secret, sealed or not. */
export interface SiteView {
  id: string;
  agent: { id: string; name: string | null };
  status: 'active' | 'suspended';
  allowed_origins: string[];
  page_commands: string[];
  appearance: SiteAppearance;
  /** A rotated-out secret that still verifies user_hash, until when; null when none does. */
  previous_secret: { expires_at: string } | null;
  created_at: string;
  updated_at: string;
}

/** A change of a site's settings (the console's PATCH): each field given replaces its value; all are checked before any is written. */
export interface SiteChange {
  origins?: string[];
  page_commands?: string[];
  appearance?: AppearancePatch;
}

const normaliseOrigin = (o: string) => o.trim().replace(/\/+$/, '').toLowerCase();

/** A site's allowed-origins list as stored: normalised, deduplicated, each a bare origin, at least one. */
function originList(origins: string[]): string[] {
  const list = [...new Set(origins.map(normaliseOrigin))];
  for (const o of list) {
    if (!/^https?:\/\/[^/\s?#]+$/.test(o)) throw new DomainError('invalid_request', `origins: '${o}' is not an origin such as https://shop.example`);
  }
  if (!list.length) throw new DomainError('invalid_request', 'origins: at least one');
  return list;
}

/** A site's page-command list as stored (domain/chat/page-commands.ts), refused as 400 invalid_request naming `field`. */
function pageCommandList(names: string[], field: 'commands' | 'page_commands'): string[] {
  try {
    return checkCommandList(names);
  } catch (err) {
    // The CLI's option is --commands; the console's field is page_commands.
    throw new DomainError('invalid_request', (err as Error).message.replace(/^commands:/, `${field}:`));
  }
}

/** The columns of a checked appearance change (unset fields untouched). */
function appearanceColumns(a: Partial<SiteAppearance>) {
  return {
    ...(a.brand_color !== undefined && { brandColor: a.brand_color }),
    ...(a.position !== undefined && { launcherPosition: a.position }),
    ...(a.launcher_label !== undefined && { launcherLabel: a.launcher_label }),
    ...(a.theme !== undefined && { theme: a.theme }),
    ...(a.language !== undefined && { language: a.language }),
  };
}

function siteView(s: ISite, agentName: string | null): SiteView {
  const graceUntil = s.previousSecretSealed && s.previousExpiresAt && s.previousExpiresAt > new Date() ? s.previousExpiresAt : null;
  return {
    id: s.id,
    agent: { id: s.agentId, name: agentName },
    status: s.status,
    allowed_origins: s.allowedOrigins,
    page_commands: s.uiCommands ?? [],
    appearance: siteAppearance(s),
    previous_secret: graceUntil ? { expires_at: graceUntil.toISOString() } : null,
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
  };
}

/** The site and Origin checks of every widget request (and of the reply socket, at its handshake and after). */
export function checkSite(site: Pick<SiteRow, 'status' | 'allowed_origins'>, origin: string | undefined): void {
  if (site.status === 'suspended') throw new DomainError('site_suspended', 'This site is suspended');
  if (!origin || !site.allowed_origins.includes(normaliseOrigin(origin))) {
    throw new DomainError('origin_not_allowed', origin ? `Origin ${origin} is not allowed for this site` : 'Origin: required');
  }
}

/**
 * user_hash: hex HMAC-SHA256 of `<site_id>.<subject>`, keyed with the site secret. The
 * subject of an external id is the id itself (the contract's `<site_id>.<external_id>`);
 * a phone or an email is signed with its kind (`phone:<value>`, `email:<value>`, see
 * `hashSubject`), so a hash signed for one kind of identity never proves another.
 */
export function userHash(secret: string, siteId: string, subject: string): string {
  return createHmac('sha256', secret).update(`${siteId}.${subject}`).digest('hex');
}

export type IdentityKind = 'external_id' | 'phone' | 'email';

/** What a user_hash signs for an identity: `<external_id>`, `phone:<value>` or `email:<value>`. */
export const hashSubject = (kind: IdentityKind, value: string): string => (kind === 'external_id' ? value : `${kind}:${value}`);

/**
 * Web-chat sites. A widget request presents the site id and comes from a browser
 * Origin that must be on the site's list. Identity is asserted by the customer's
 * backend with `user_hash`; a rotated-out secret keeps verifying for a grace period.
 */
export class SiteService {
  /** Site secrets sealed with the service's key (the key is checked against them at start-up, before any service exists). */
  static async sealedSiteSecrets(em: EntityManager): Promise<SealedSecrets> {
    const count = await em.count(Site);
    const [row] = count ? await em.find(Site, {}, { fields: ['id', 'secretSealed'], limit: 1 }) : [];
    return { count, sample: row ? { id: row.id, sealed: row.secretSealed } : null };
  }

  private readonly frames: ChatFrames;

  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
    private readonly repos: Pick<Repositories, 'agents'>,
  ) {
    this.frames = new ChatFrames(em);
  }

  /** The filter of one site, within the scope's workspace when it names one. */
  private static where(siteId: string, scope: SiteScope): { id: string; workspaceId?: string } {
    return scope.workspaceId === undefined ? { id: siteId } : { id: siteId, workspaceId: scope.workspaceId };
  }

  private static notFound(siteId: string): DomainError {
    return new DomainError('not_found', `No site with id '${siteId}'`);
  }

  /** The workspace's sites, newest first, each with its agent's name. */
  async list(workspaceId: string): Promise<SiteView[]> {
    const em = this.em.fork();
    const sites = await em.find(Site, { workspaceId }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    const names = await this.repos.agents.agentNames(em, workspaceId, [...new Set(sites.map((s) => s.agentId))]);
    return sites.map((s) => siteView(s, names.get(s.agentId) ?? null));
  }

  /** One site of the workspace; `not_found` for an unknown id and for another workspace's site alike. */
  async get(workspaceId: string, siteId: string): Promise<SiteView> {
    const em = this.em.fork();
    const site = await em.findOne(Site, { id: siteId, workspaceId });
    if (!site) throw SiteService.notFound(siteId);
    const names = await this.repos.agents.agentNames(em, workspaceId, [site.agentId]);
    return siteView(site, names.get(site.agentId) ?? null);
  }

  /**
   * Origins, page commands and look at once: every field is checked before anything is written, so a refused
   * change leaves the site as it was. Open sockets re-check when the origins changed.
   */
  async update(siteId: string, change: SiteChange, scope: SiteScope = {}): Promise<void> {
    const origins = change.origins === undefined ? undefined : originList(change.origins);
    const commands = change.page_commands === undefined ? undefined : pageCommandList(change.page_commands, 'page_commands');
    const a = change.appearance === undefined ? {} : checkAppearance(change.appearance);
    const changed = await this.em.fork().nativeUpdate(Site, SiteService.where(siteId, scope), {
      ...(origins !== undefined && { allowedOrigins: origins }),
      ...(commands !== undefined && { uiCommands: commands }),
      ...appearanceColumns(a),
      updatedAt: new Date(),
    });
    if (!changed) throw SiteService.notFound(siteId);
    if (origins !== undefined) await this.frames.recheck({ site: siteId });
  }

  async create(workspaceId: string, agentId: string, origins: string[]): Promise<{ site_id: string; site_secret: string }> {
    const list = originList(origins);
    const em = this.em.fork();
    if (!(await this.repos.agents.findAgent(em, workspaceId, agentId))) throw new DomainError('not_found', `No agent with id '${agentId}' in workspace '${workspaceId}'`);
    const id = newId('site');
    const secret = `sitesec_${randomBytes(24).toString('hex')}`;
    await em.insert(Site, { id, workspaceId, agentId, allowedOrigins: list, status: 'active', secretSealed: this.box.seal(secret, id) });
    return { site_id: id, site_secret: secret };
  }

  /** A new secret; the old one keeps verifying as "expiring" for `graceHours`. */
  async rotateSecret(
    siteId: string,
    graceHours = DEFAULT_ROTATION_GRACE_HOURS,
    ctx: AuditContext = SYSTEM_CONTEXT,
    scope: SiteScope = {},
  ): Promise<{ site_id: string; site_secret: string; previous_expires_at: string }> {
    const secret = `sitesec_${randomBytes(24).toString('hex')}`;
    return this.em.fork().transactional(async (em) => {
      const site = await em.findOne(Site, SiteService.where(siteId, scope), { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!site) throw SiteService.notFound(siteId);
      site.previousSecretSealed = site.secretSealed;
      site.previousExpiresAt = new Date(Date.now() + graceHours * 3_600_000);
      site.secretSealed = this.box.seal(secret, siteId);
      await em.flush();
      await recordAudit(em, ctx, { workspaceId: site.workspaceId, action: 'site.secret_rotated', target: { type: 'site', id: siteId }, details: { grace_hours: graceHours } });
      return { site_id: siteId, site_secret: secret, previous_expires_at: site.previousExpiresAt.toISOString() };
    });
  }

  async setStatus(siteId: string, status: 'active' | 'suspended', scope: SiteScope = {}): Promise<{ site_id: string; status: string }> {
    const changed = await this.em.fork().nativeUpdate(Site, SiteService.where(siteId, scope), { status, updatedAt: new Date() });
    if (!changed) throw SiteService.notFound(siteId);
    // Open reply sockets of a suspended site close now, in every API process.
    await this.frames.recheck({ site: siteId });
    return { site_id: siteId, status };
  }

  /** Replaces the allowed-origins list; open sockets from an origin no longer listed close. */
  async setOrigins(siteId: string, origins: string[]): Promise<{ site_id: string; allowed_origins: string[] }> {
    const list = originList(origins);
    const changed = await this.em.fork().nativeUpdate(Site, { id: siteId }, { allowedOrigins: list, updatedAt: new Date() });
    if (!changed) throw new DomainError('not_found', `No site with id '${siteId}'`);
    await this.frames.recheck({ site: siteId });
    return { site_id: siteId, allowed_origins: list };
  }

  /**
   * The page commands the site's page handles (admin CLI `site set-commands`): the agent
   * may send only these, as `ui:command` frames; an empty list turns them off.
   */
  async setPageCommands(siteId: string, names: string[]): Promise<{ site_id: string; ui_commands: string[] }> {
    const list = pageCommandList(names, 'commands');
    const changed = await this.em.fork().nativeUpdate(Site, { id: siteId }, { uiCommands: list, updatedAt: new Date() });
    if (!changed) throw new DomainError('not_found', `No site with id '${siteId}'`);
    return { site_id: siteId, ui_commands: list };
  }

  /**
   * Sets the widget's look and language (admin CLI `site set-appearance`): the fields given
   * change, the others keep their value; a null or empty launcher label removes it.
   */
  async setAppearance(siteId: string, patch: AppearancePatch): Promise<{ site_id: string; appearance: SiteAppearance }> {
    const em = this.em.fork();
    const changed = await em.nativeUpdate(Site, { id: siteId }, { ...appearanceColumns(checkAppearance(patch)), updatedAt: new Date() });
    if (!changed) throw new DomainError('not_found', `No site with id '${siteId}'`);
    const site = await em.findOneOrFail(Site, { id: siteId });
    return { site_id: siteId, appearance: siteAppearance(site) };
  }

  /** A site as the operator sees it (admin CLI `site show`): no secret, sealed or not. */
  async show(siteId: string): Promise<{ site_id: string; workspace_id: string; agent_id: string; status: string; allowed_origins: string[]; ui_commands: string[]; appearance: SiteAppearance }> {
    const site = await this.em.fork().findOne(Site, { id: siteId });
    if (!site) throw new DomainError('not_found', `No site with id '${siteId}'`);
    const r = siteRow(site);
    return { site_id: r.id, workspace_id: r.workspace_id, agent_id: r.agent_id, status: r.status, allowed_origins: r.allowed_origins, ui_commands: r.ui_commands, appearance: r.appearance };
  }

  /** The checks every widget request passes, in the contract's order of codes (docs/contract.md). */
  async authenticate(siteId: string | undefined, origin: string | undefined): Promise<SiteRow> {
    if (!siteId) throw new DomainError('missing_site_id', 'X-Concierge-Site: required');
    const site = await this.em.fork().findOne(Site, { id: siteId });
    if (!site) throw new DomainError('unknown_site', `No site with id '${siteId}'`);
    const row = siteRow(site);
    checkSite(row, origin);
    return row;
  }

  /** These sites (unknown ids are left out), in one query: the reply sockets' re-checks. */
  async many(siteIds: string[]): Promise<SiteRow[]> {
    if (!siteIds.length) return [];
    return (await this.em.fork().find(Site, { id: { $in: siteIds } })).map(siteRow);
  }

  /** The identity level of a request; throws the contract's 403s (docs/contract.md). */
  identify(site: SiteRow, ctx: UserContext | undefined, requireVerification: boolean): AuthLevel {
    if (!ctx?.external_id) return 'anonymous';
    if (!ctx.user_hash) {
      if (requireVerification) throw new DomainError('identity_verification_required', 'This site requires user_hash with external_id');
      return 'self_asserted';
    }
    if (!this.verifies(site, hashSubject('external_id', ctx.external_id), ctx.user_hash)) {
      throw new DomainError('identity_verification_failed', 'user_hash matches no active or expiring secret of this site');
    }
    return 'verified';
  }

  /** Whether `hash` is the user_hash of `subject` (see `hashSubject`) under an active or expiring secret. */
  verifies(site: SiteRow, subject: string, hash: string): boolean {
    const given = /^[0-9a-f]{64}$/i.test(hash) ? Buffer.from(hash, 'hex') : null;
    const secrets = [this.box.open(site.secret_sealed, site.id)];
    if (site.previous_secret_sealed && site.previous_expires_at && new Date(site.previous_expires_at) > new Date()) {
      secrets.push(this.box.open(site.previous_secret_sealed, site.id));
    }
    // Every secret is compared (no early exit), each in constant time.
    let ok = false;
    for (const s of secrets) {
      const expected = Buffer.from(userHash(s, site.id, subject), 'hex');
      if (given && timingSafeEqual(given, expected)) ok = true;
    }
    return ok;
  }
}
