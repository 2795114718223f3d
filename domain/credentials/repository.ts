import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { Credential } from '../../db/entities';

/**
 * The one data path to `credentials` for other modules: an mcp server finds its credential and binds it
 * to its origin, inbound media is fetched with a msgapp token. CredentialService owns the
 * rest. Every method runs on the EntityManager it is given.
 */
export class CredentialRepository {
  /**
   * Binds an mcp credential to `origin` unless it is bound already (set at registration, or by
   * the first server it was attached to); the origin it is bound to afterwards.
   */
  async bindMcpCredentialOrigin(em: EntityManager, id: string, origin: string): Promise<string | null> {
    // raw SQL: one conditional jsonb merge, atomic against a concurrent first attachment (the ORM would read, then write the whole object).
    // eslint-disable-next-line no-restricted-syntax
    await em.execute(`update credentials set settings = coalesce(settings, '{}'::jsonb) || jsonb_build_object('origin', ?::text) where id = ? and provider = 'mcp' and settings->>'origin' is null`, [origin, id]);
    const row = await em.fork().findOne(Credential, { id }, { fields: ['settings'] });
    return row?.settings?.origin ?? null;
  }

  /** An mcp credential of this workspace: its sealed token and the origin it is bound to (none yet: null); null when there is none. */
  async findMcpCredential(em: EntityManager, workspaceId: string, id: string): Promise<{ id: string; origin: string | null; secretSealed: string } | null> {
    const cred = await em.findOne(Credential, { id, workspaceId, provider: 'mcp' });
    return cred ? { id: cred.id, origin: cred.settings?.origin ?? null, secretSealed: cred.secretSealed } : null;
  }

  /** The opened token of a msgapp credential of this workspace; null when there is none. */
  async openMsgappToken(em: EntityManager, box: SecretBox, workspaceId: string, id: string): Promise<string | null> {
    const cred = await em.findOne(Credential, { id, workspaceId, provider: 'msgapp' });
    return cred ? box.open(cred.secretSealed, cred.id) : null;
  }
}
