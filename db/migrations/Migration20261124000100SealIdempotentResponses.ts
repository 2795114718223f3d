import { Migration } from '@mikro-orm/migrations';

/**
 * Stored idempotent responses are sealed from now on. Rows written before carry their
 * body in plain text; those holding a secret shown once (a `whsec_…` signing secret, a
 * site secret, an `sk_…` key) are deleted rather than left readable at rest. The others
 * still replay as they are until they expire.
 */
export class Migration20261124000100SealIdempotentResponses extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      delete from idempotency_keys
      where response_body is not null and response_body not like 'v1.%'
        and response_body ~ '(whsec_|sitesec_|sk_[0-9a-f]{64})'`);
  }

  /** Nothing to undo in the schema: the deleted rows were replays of secrets, which must not come back. */
  override async down(): Promise<void> {}
}
