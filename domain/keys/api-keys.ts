import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiKey, RetiredKeySecret, type IApiKey } from '../../db/entities';
import { WorkspaceRepository } from '../workspaces/repository';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { ALL_SCOPES, isScope, type Scope } from './scopes';

/** `sk_` followed by 64 lowercase hexadecimal characters. */
export const API_KEY_PATTERN = /^sk_[0-9a-f]{64}$/;

export interface AuthenticatedKey {
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
}

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
  ) {}

  async create(workspaceId: string, name: string, scopes: Scope[]): Promise<KeyView & { key: string }> {
    if (!name.trim()) throw new DomainError('invalid_request', 'name: must not be empty');
    const em = this.em.fork();
    if (!(await this.workspaces.workspaceExists(em, workspaceId))) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
    const key = generateApiKey();
    const row = em.create(ApiKey, {
      id: newId('key'),
      workspaceId,
      name,
      prefix: displayPrefix(key),
      secretHash: hashApiKey(key),
      scopes,
      status: 'active',
      rotatedAt: null,
      revokedAt: null,
    });
    await em.flush();
    return { ...view(row), key };
  }

  async list(workspaceId: string): Promise<KeyView[]> {
    const rows = await this.em.fork().find(ApiKey, { workspaceId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return rows.map(view);
  }

  /** New secret for the same key; the old one answers `revoked_api_key` from the commit on. */
  async rotate(keyId: string): Promise<{ id: string; key: string; prefix: string }> {
    const key = generateApiKey();
    await this.em.fork().transactional(async (em) => {
      const row = await em.findOne(ApiKey, { id: keyId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!row) throw new DomainError('not_found', `No API key with id '${keyId}'`);
      if (row.status !== 'active') throw new DomainError('key_revoked', `API key '${keyId}' is deleted and cannot be rotated`);
      em.create(RetiredKeySecret, { secretHash: row.secretHash, keyId: row.id });
      row.secretHash = hashApiKey(key);
      row.prefix = displayPrefix(key);
      row.rotatedAt = new Date();
      await em.flush();
      await notifyKeyChange(em, row.id);
    });
    this.cache?.clear();
    return { id: keyId, key, prefix: displayPrefix(key) };
  }

  /** Permanent revocation: requests with the key answer `revoked_api_key` from the commit on. */
  async delete(keyId: string): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const row = await em.findOne(ApiKey, { id: keyId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!row) throw new DomainError('not_found', `No API key with id '${keyId}'`);
      if (row.status === 'revoked') return;
      row.status = 'revoked';
      row.revokedAt = new Date();
      await em.flush();
      await notifyKeyChange(em, row.id);
    });
    this.cache?.clear();
  }

  /** Looks a presented key up by its hash. The caller has already checked the format. */
  async lookup(presented: string): Promise<KeyLookup> {
    const hash = hashApiKey(presented);
    const cached = this.cache?.get(hash);
    if (cached) return cached;
    const generation = this.cache?.generation();
    const result = await this.lookupUncached(hash);
    if (result.kind !== 'unknown') this.cache?.set(hash, result, generation);
    return result;
  }

  private async lookupUncached(hash: string): Promise<KeyLookup> {
    const em = this.em.fork();
    const row = await em.findOne(ApiKey, { secretHash: hash });
    if (row && sameHash(row.secretHash, hash)) {
      if (row.status !== 'active') return { kind: 'revoked' };
      return { kind: 'active', key: { id: row.id, workspaceId: row.workspaceId, scopes: new Set(row.scopes) } };
    }
    const retired = await em.findOne(RetiredKeySecret, { secretHash: hash });
    if (retired && sameHash(retired.secretHash, hash)) return { kind: 'revoked' };
    return { kind: 'unknown' };
  }
}
