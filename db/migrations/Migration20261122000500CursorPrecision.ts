import { Migration } from '@mikro-orm/migrations';

/**
 * Keyset cursors carry a row's created_at as a JavaScript timestamp (milliseconds);
 * PostgreSQL keeps microseconds. A cursor rounded down would skip rows created in the
 * same millisecond, so the columns cursors page on keep exactly what a cursor can say.
 */
const PAGED = ['kb_files', 'webhook_deliveries', 'agents', 'customers', 'conversations', 'conversation_events'];

export class Migration20261122000500CursorPrecision extends Migration {
  override async up(): Promise<void> {
    for (const table of PAGED) this.addSql(`alter table ${table} alter column created_at type timestamptz(3)`);
  }

  override async down(): Promise<void> {
    for (const table of PAGED) this.addSql(`alter table ${table} alter column created_at type timestamptz`);
  }
}
