import { Migration } from '@mikro-orm/migrations';

/**
 * Who answered an outbound call (issue 32, the phone): `human`, `machine` or `unknown`, set by answering-machine
 * detection on calls whose agent screens for machines (AgentSpec.phone.answering_machine); null when not screened.
 */
export class Migration20261129030000CallAnsweredBy extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table calls add column answered_by text check (answered_by in ('human', 'machine', 'unknown'))`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table calls drop column answered_by');
  }
}
