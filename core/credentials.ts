import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from './crypto/secret-box';
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
    const ws = await this.em.fork().execute('select 1 from workspaces where id = ?', [workspaceId]);
    if (!ws.length) throw new ApiError(404, 'not_found', `No workspace with id '${workspaceId}'`);
    await this.em.fork().execute('insert into credentials (id, workspace_id, kind, name, secret_sealed) values (?, ?, ?, ?, ?)', [
      id,
      workspaceId,
      kind,
      name,
      this.box.seal(secret, id),
    ]);
    return { id, name, kind };
  }

  /** The opened token of a msgapp credential of this workspace; null when there is none. */
  async msgappToken(workspaceId: string, id: string): Promise<string | null> {
    const [cred] = await this.em.fork().execute<{ id: string; secret_sealed: string }[]>(
      `select id, secret_sealed from credentials where id = ? and workspace_id = ? and kind = 'msgapp_access_token'`,
      [id, workspaceId],
    );
    return cred ? this.box.open(cred.secret_sealed, cred.id) : null;
  }
}
