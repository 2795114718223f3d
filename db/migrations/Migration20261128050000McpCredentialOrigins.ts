import { Migration } from '@mikro-orm/migrations';

/**
 * An MCP credential's token goes to one origin only (`settings.origin`). Credentials in use
 * are bound to the origin of the oldest server that uses them; a server at another origin
 * loses the credential (its last_error says why) instead of keeping on sending it there.
 * Origins are computed with the WHATWG URL parser, as the service compares them.
 */
export class Migration20261128050000McpCredentialOrigins extends Migration {
  override async up(): Promise<void> {
    // raw SQL: a migration reads and writes the tables as they are at this point of the schema's history.
    // eslint-disable-next-line no-restricted-syntax
    const rows = (await this.execute(
      `select m.id, m.url, m.credential_id, m.enabled, c.settings->>'origin' as origin
         from mcp_servers m join credentials c on c.id = m.credential_id and c.provider = 'mcp'
        order by m.created_at, m.id`,
    )) as Array<{ id: string; url: string; credential_id: string; enabled: boolean; origin: string | null }>;
    const bound = new Map<string, string>();
    for (const r of rows) if (r.origin) bound.set(r.credential_id, r.origin);
    for (const r of rows) {
      let origin: string | null = null;
      try {
        origin = new URL(r.url).origin;
      } catch {
        // A URL that does not parse can bind nothing: the server loses the credential below.
      }
      if (origin && !bound.has(r.credential_id)) {
        bound.set(r.credential_id, origin);
        // raw SQL: as above (a migration).
        // eslint-disable-next-line no-restricted-syntax
        await this.execute(`update credentials set settings = coalesce(settings, '{}'::jsonb) || jsonb_build_object('origin', ?::text) where id = ?`, [origin, r.credential_id]);
      }
      if (origin !== bound.get(r.credential_id)) {
        const why = `credential ${r.credential_id} detached: it is bound to ${bound.get(r.credential_id)}, not this server's origin; attach a credential registered for this server`;
        // raw SQL: as above (a migration).
        // eslint-disable-next-line no-restricted-syntax
        await this.execute(
          `update mcp_servers set credential_id = null, last_error = ?, status = case when enabled then 'error' else status end, updated_at = now() where id = ?`,
          [why, r.id],
        );
      }
    }
  }

  override async down(): Promise<void> {
    this.addSql(`update credentials set settings = settings - 'origin' where provider = 'mcp'`);
  }
}
