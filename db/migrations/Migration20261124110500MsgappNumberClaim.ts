import { Migration } from '@mikro-orm/migrations';

/**
 * A msgapp `phone_number_id` belongs to at most one agent across the installation: the
 * published agent that can run (no invalid_reasons). The unique partial index makes two
 * concurrent publishes of the same number race-free (the loser gets a unique violation,
 * which the agent service reports as 409 number_in_use); an agent that cannot run is
 * outside the index and claims nothing.
 */
export class Migration20261124110500MsgappNumberClaim extends Migration {
  override async up(): Promise<void> {
    // Agents naming a credential that does not exist in their workspace could never send: they stop claiming.
    this.addSql(`
      update agents a set invalid_reasons = a.invalid_reasons || array['credential ' || (a.spec #>> '{triggers,msgapp,credential_id}') || ' does not exist in this workspace']
      where a.status = 'published' and cardinality(a.invalid_reasons) = 0
        and a.spec #>> '{triggers,msgapp,credential_id}' is not null
        and not exists (select 1 from credentials c where c.id = a.spec #>> '{triggers,msgapp,credential_id}' and c.workspace_id = a.workspace_id)`);
    // Existing double claims: the agent inbound routing already chose (first published) keeps the number.
    this.addSql(`
      with ranked as (
        select id, row_number() over (partition by spec #>> '{triggers,msgapp,phone_number_id}' order by published_at, id) as n
        from agents
        where status = 'published' and cardinality(invalid_reasons) = 0 and spec #>> '{triggers,msgapp,phone_number_id}' is not null
      )
      update agents a set invalid_reasons = a.invalid_reasons || array['msgapp phone_number_id ' || (a.spec #>> '{triggers,msgapp,phone_number_id}') || ' is in use by another agent']
      from ranked r where r.id = a.id and r.n > 1`);
    this.addSql(`
      create unique index agents_msgapp_claim_uq on agents ((spec #>> '{triggers,msgapp,phone_number_id}'))
      where status = 'published' and cardinality(invalid_reasons) = 0 and spec #>> '{triggers,msgapp,phone_number_id}' is not null`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists agents_msgapp_claim_uq');
  }
}
