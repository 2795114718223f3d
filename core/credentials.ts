import type { EntityManager } from '@mikro-orm/postgresql';
import type { SealedSecrets, SecretBox } from './crypto/secret-box';
import { Credential, Workspace } from './db/entities';
import { ApiError } from './errors';
import { newId } from './ids';

/**
 * Provider credentials (a msgapp number's access token), sealed with the service's
 * encryption key and bound to their id. Only the activities that call the provider
 * open them; nothing reads them back out.
 */
export class CredentialService {
  constructor(
    private readonly em: EntityManager,
    private readonly box: SecretBox,
  ) {}

  async create(workspaceId: string, kind: 'msgapp_access_token', name: string, secret: string): Promise<{ id: string; name: string; kind: string }> {
    if (!secret.trim()) throw new ApiError(400, 'invalid_request', 'token: must not be empty');
    const id = newId('cred');
    const em = this.em.fork();
    if (!(await em.count(Workspace, { id: workspaceId }))) throw new ApiError(404, 'not_found', `No workspace with id '${workspaceId}'`);
    await em.insert(Credential, { id, workspaceId, kind, name, secretSealed: this.box.seal(secret, id) });
    return { id, name, kind };
  }

  /** Whether the workspace has a msgapp credential with this id (nothing is opened). */
  async hasMsgappToken(workspaceId: string, id: string): Promise<boolean> {
    return (await this.em.fork().count(Credential, { id, workspaceId, kind: 'msgapp_access_token' })) > 0;
  }

  /** The opened token of a msgapp credential of this workspace; null when there is none. */
  async msgappToken(workspaceId: string, id: string): Promise<string | null> {
    const cred = await this.em.fork().findOne(Credential, { id, workspaceId, kind: 'msgapp_access_token' });
    return cred ? this.box.open(cred.secretSealed, cred.id) : null;
  }
}

/** Provider credentials sealed with the service's key (the key is checked against them at start-up, before any service exists). */
export async function sealedCredentials(em: EntityManager): Promise<SealedSecrets> {
  const count = await em.count(Credential);
  const [row] = count ? await em.find(Credential, {}, { fields: ['id', 'secretSealed'], limit: 1 }) : [];
  return { count, sample: row ? { id: row.id, sealed: row.secretSealed } : null };
}
