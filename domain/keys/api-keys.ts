import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiKey, RetiredKeySecret, type IApiKey } from '../../db/entities';
import { WorkspaceRepository } from '../workspaces/repository';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { recordAudit, SYSTEM_CONTEXT, type AuditContext } from '../audit/audit-log';
import { ALL_SCOPES, isScope, type Scope } from './scopes';

/** `sk_` followed by 64 lowercase hexadecimal characters. */
export const API_KEY_PATTERN = /^sk_[0-9a-f]{64}$/;

export interface AuthenticatedKey {
  kind: 'key';
  id: string;
  workspaceId: string;
  scopes: ReadonlySet<string>;
}

export type KeyLookup = { kind: 'active'; key: AuthenticatedKey } | { kind: 'revoked' } | { kind: 'unknown' };

/** The PostgreSQL channel every key rotation or deletion NOTIFYs in its transaction. */
export const KEY_CHANGES_CHANNEL = 'concierge_api_keys';

/**
 * What this service needs of a look-up cache (KeyCache in key-cache.ts, which listens on
 * KEY_CHANGES_CHANNEL): declared here so the dependency runs one way, cache → service.
 */
export interface KeyLookupCache {
  get(hash: string): KeyLookup | undefined;
  set(hash: string, value: KeyLookup, generation: number | undefined): void;
  generation(): number;
  clear(): void;
}

export interface KeyView {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  status: 'active' | 'revoked';
  created_at: string;
  rotated_at: string | null;
  revoked_at: string | null;
  /** To the minute: recorded at most once a minute per key. */
  last_used_at: string | null;
  /** Whether the console can copy the value: the key was created or rotated since values are kept sealed, and is active. */
  copyable: boolean;
}

/** Restricts a key operation to one workspace (the console's), and says who acts, for the audit log. */
export interface KeyActOptions {
  workspaceId?: string;
  ctx?: AuditContext;
}

/** last_used_at is written at most this often per key. */
const LAST_USED_EVERY_MS = 60_000;

export function generateApiKey(): string {
  return `sk_${randomBytes(32).toString('hex')}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function displayPrefix(key: string): string {
  return key.slice(0, 3 + 8);
}

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

function view(k: IApiKey): KeyView {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    scopes: [...k.scopes],
    status: k.status,
    created_at: k.createdAt.toISOString(),
    rotated_at: k.rotatedAt ? k.rotatedAt.toISOString() : null,
    revoked_at: k.revokedAt ? k.revokedAt.toISOString() : null,
    last_used_at: k.lastUsedAt ? k.lastUsedAt.toISOString() : null,
    copyable: k.status === 'active' && Boolean(k.sealedValue),
  };
}

export function parseScopes(list: string): Scope[] {
  const scopes = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (scopes.length === 0) throw new DomainError('invalid_request', 'scopes: at least one scope is required');
  const unknown = scopes.filter((s) => !isScope(s));
  if (unknown.length) throw new DomainError('invalid_request', `scopes: unknown scope(s) ${unknown.join(', ')}; valid scopes: ${ALL_SCOPES.join(', ')}`);
  return [...new Set(scopes)] as Scope[];
}

/** Wakes every process's key cache when the transaction commits (NOTIFY is transactional). */
async function notifyKeyChange(em: EntityManager, keyId: string): Promise<void> {
  // raw SQL: pg_notify has no ORM form; it must run in the caller's transaction to be sent at its commit.
  // eslint-disable-next-line no-restricted-syntax
  await em.execute('select pg_notify(?, ?)', [KEY_CHANGES_CHANNEL, keyId]);
}

/**
 * Keys are stored only as a SHA-256 hash plus their display prefix. Every change that
 * can end a key's validity (rotate, delete) publishes a NOTIFY in the same transaction,
 * so every API process drops its cached copy when the change commits.
 */
export class ApiKeyService {
  constructor(
    private readonly em: EntityManager,
    private readonly cache?: KeyLookupCache,
    /** Default: the one repository of workspaces (tests build the service on its own). */
    private readonly workspaces: Pick<WorkspaceRepository, 'workspaceExists'> = new WorkspaceRepository(),
    /** Seals each new value for the console's copy; absent (a service built without one), keys are made uncopyable. */
    private readonly box: SecretBox | null = null,
  ) {}

  private sealValue(keyId: string, key: string): string | null {
    return this.box ? this.box.seal(key, keyId) : null;
  }

  async create(workspaceId: string, name: string, scopes: Scope[], ctx: AuditContext = SYSTEM_CONTEXT): Promise<KeyView & { key: string }> {
    if (!name.trim()) throw new DomainError('invalid_request', 'name: must not be empty');
    const em = this.em.fork();
    if (!(await this.workspaces.workspaceExists(em, workspaceId))) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
    const key = generateApiKey();
    const id = newId('key');
    const row = await em.transactional(async (tx) => {
      const made = tx.create(ApiKey, {
        id,
        workspaceId,
        name,
        prefix: displayPrefix(key),
        secretHash: hashApiKey(key),
        scopes,
        status: 'active',
        rotatedAt: null,
        revokedAt: null,
        sealedValue: this.sealValue(id, key),
        lastUsedAt: null,
      });
      await tx.flush();
      await recordAudit(tx, ctx, { workspaceId, action: 'key.created', target: { type: 'api_key', id }, details: { name, prefix: made.prefix, scopes } });
      return made;
    });
    return { ...view(row), key };
  }

  async list(workspaceId: string): Promise<KeyView[]> {
    const rows = await this.em.fork().find(ApiKey, { workspaceId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return rows.map(view);
  }

  async get(workspaceId: string, keyId: string): Promise<KeyView> {
    const row = await this.em.fork().findOne(ApiKey, { id: keyId, workspaceId });
    if (!row) throw new DomainError('not_found', `No API key with id '${keyId}' in this workspace`);
    return view(row);
  }

  /** The full value of a key created or rotated since values are sealed (the console's copy, audited as key.copied). */
  async copy(workspaceId: string, keyId: string, ctx: AuditContext): Promise<{ id: string; key: string }> {
    const em = this.em.fork();
    const row = await em.findOne(ApiKey, { id: keyId, workspaceId });
    if (!row) throw new DomainError('not_found', `No API key with id '${keyId}' in this workspace`);
    if (row.status !== 'active') throw new DomainError('key_revoked', `API key '${keyId}' is deleted`);
    if (!row.sealedValue || !this.box) throw new DomainError('key_not_copyable', `API key '${keyId}' was made before keys were kept for copying; rotate it to get a copyable value`);
    const key = this.box.open(row.sealedValue, row.id);
    await recordAudit(em, ctx, { workspaceId, action: 'key.copied', target: { type: 'api_key', id: keyId }, details: { prefix: row.prefix } });
    return { id: keyId, key };
  }

  /** New secret for the same key; the old one answers `revoked_api_key` from the commit on. */
  async rotate(keyId: string, opts: KeyActOptions = {}): Promise<KeyView & { key: string }> {
    const key = generateApiKey();
    const row = await this.em.fork().transactional(async (em) => {
      const row = await this.lockedKey(em, keyId, opts.workspaceId);
      if (row.status !== 'active') throw new DomainError('key_revoked', `API key '${keyId}' is deleted and cannot be rotated`);
      em.create(RetiredKeySecret, { secretHash: row.secretHash, keyId: row.id });
      row.secretHash = hashApiKey(key);
      row.prefix = displayPrefix(key);
      row.rotatedAt = new Date();
      row.sealedValue = this.sealValue(row.id, key);
      await em.flush();
      await recordAudit(em, opts.ctx ?? SYSTEM_CONTEXT, { workspaceId: row.workspaceId, action: 'key.rotated', target: { type: 'api_key', id: keyId }, details: { name: row.name, prefix: row.prefix } });
      await notifyKeyChange(em, row.id);
      return row;
    });
    this.cache?.clear();
    return { ...view(row), key };
  }

  /** Permanent revocation: requests with the key answer `revoked_api_key` from the commit on. */
  async delete(keyId: string, opts: KeyActOptions = {}): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const row = await this.lockedKey(em, keyId, opts.workspaceId);
      if (row.status === 'revoked') return;
      row.status = 'revoked';
      row.revokedAt = new Date();
      // A deleted key is never copied again: its sealed value goes with it.
      row.sealedValue = null;
      await em.flush();
      await recordAudit(em, opts.ctx ?? SYSTEM_CONTEXT, { workspaceId: row.workspaceId, action: 'key.deleted', target: { type: 'api_key', id: keyId }, details: { name: row.name, prefix: row.prefix } });
      await notifyKeyChange(em, row.id);
    });
    this.cache?.clear();
  }

  private async lockedKey(em: EntityManager, keyId: string, workspaceId: string | undefined) {
    const row = await em.findOne(ApiKey, workspaceId ? { id: keyId, workspaceId } : { id: keyId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!row) throw new DomainError('not_found', `No API key with id '${keyId}'${workspaceId ? ' in this workspace' : ''}`);
    return row;
  }

  /** When each key's last use was last written by this process (ms): a request is not a write. */
  private readonly usedAt = new Map<string, number>();

  /**
   * Records a key's use, at most once a minute per key: once per process by the map above, and across processes by
   * the condition (only a stamp older than a minute is replaced). Not awaited by the request; a failure is dropped.
   */
  private noteUse(keyId: string): void {
    const now = Date.now();
    if (now - (this.usedAt.get(keyId) ?? 0) < LAST_USED_EVERY_MS) return;
    if (this.usedAt.size > 10_000) this.usedAt.clear();
    this.usedAt.set(keyId, now);
    const stale = new Date(now - LAST_USED_EVERY_MS);
    void this.em
      .fork()
      .nativeUpdate(ApiKey, { id: keyId, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lt: stale } }] }, { lastUsedAt: new Date(now) })
      .catch(() => undefined);
  }

  /** Each stored key value is sealed with the service's key and bound to the key's id (app/encryption-key.ts checks the key opens them). */
  static async sealedKeyValues(em: EntityManager): Promise<{ count: number; sample: { id: string; sealed: string } | null }> {
    const count = await em.count(ApiKey, { sealedValue: { $ne: null } });
    const row = count ? await em.findOne(ApiKey, { sealedValue: { $ne: null } }, { fields: ['id', 'sealedValue'] }) : null;
    return { count, sample: row?.sealedValue ? { id: row.id, sealed: row.sealedValue } : null };
  }

  /** Looks a presented key up by its hash. The caller has already checked the format. */
  async lookup(presented: string): Promise<KeyLookup> {
    const hash = hashApiKey(presented);
    const cached = this.cache?.get(hash);
    const generation = this.cache?.generation();
    const result = cached ?? (await this.lookupUncached(hash));
    if (!cached && result.kind !== 'unknown') this.cache?.set(hash, result, generation);
    if (result.kind === 'active') this.noteUse(result.key.id);
    return result;
  }

  private async lookupUncached(hash: string): Promise<KeyLookup> {
    const em = this.em.fork();
    const row = await em.findOne(ApiKey, { secretHash: hash });
    if (row && sameHash(row.secretHash, hash)) {
      if (row.status !== 'active') return { kind: 'revoked' };
      return { kind: 'active', key: { kind: 'key', id: row.id, workspaceId: row.workspaceId, scopes: new Set(row.scopes) } };
    }
    const retired = await em.findOne(RetiredKeySecret, { secretHash: hash });
    if (retired && sameHash(retired.secretHash, hash)) return { kind: 'revoked' };
    return { kind: 'unknown' };
  }
}
