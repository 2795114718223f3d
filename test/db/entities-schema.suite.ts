import { defineEntity, MikroORM, SchemaComparator, type SchemaDifference } from '@mikro-orm/postgresql';
import { allEntities } from '../../db/entities';
import { ormOptions, type Orm } from '../../db/orm';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * The entities must describe the migrated schema exactly, column for column: every table
 * the migrations create has an entity, every entity property is a column of that type,
 * nullability and default. The migrations describe more than the entities do, and these
 * differences are tolerated (the comparator would drop them, nothing else):
 * - indexes and unique constraints: partial and expression indexes (`where is_current`,
 *   `coalesce(parent_id, '')`, `spec #>> …`) that MikroORM cannot declare, and plain ones
 *   kept in one place (the migrations) rather than two;
 * - foreign keys: entities reference other tables by plain id columns (no relations), so
 *   each aggregate's module queries only its own tables;
 * - check constraints other than enum ones (`char_length(name) between 1 and 200`).
 * Anything the entities declare that the database lacks (a column, index, foreign key or
 * check) is an error.
 */
async function schemaDiff(orm: Orm): Promise<SchemaDifference> {
  // prepareSchemaForComparison is what getUpdateSchemaSQL runs before comparing: the
  // database's schema read back, and the one the entities describe.
  const generator = orm.schema as unknown as { prepareSchemaForComparison(o: object): Promise<{ fromSchema: unknown; toSchema: unknown }> };
  const { fromSchema, toSchema } = await generator.prepareSchemaForComparison({});
  return new SchemaComparator(orm.em.getPlatform()).compare(fromSchema as never, toSchema as never);
}

/** Every difference that is not one of the tolerated kinds above, as `table: what`. */
function columnDifferences(diff: SchemaDifference): string[] {
  const out: string[] = [];
  for (const t of Object.keys(diff.newTables)) out.push(`${t}: entity without a table`);
  for (const t of Object.keys(diff.removedTables)) out.push(`${t}: table without an entity`);
  for (const [table, d] of Object.entries(diff.changedTables)) {
    const add = (what: string, names: object) => out.push(...Object.keys(names).map((n) => `${table}: ${what} ${n}`));
    add('entity column missing from the table:', d.addedColumns);
    add('table column missing from the entity:', d.removedColumns);
    add('column renamed:', d.renamedColumns);
    for (const [name, c] of Object.entries(d.changedColumns)) out.push(`${table}: column ${name} differs in ${[...c.changedProperties].join(', ')}`);
    add('entity index missing from the table:', d.addedIndexes);
    add('index differs:', d.changedIndexes);
    add('entity foreign key missing from the table:', d.addedForeignKeys);
    add('foreign key differs:', d.changedForeignKeys);
    add('entity check missing from the table:', d.addedChecks);
    add('check differs:', d.changedChecks);
  }
  return out;
}

describe('entities agree with the migrated schema', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  test('no table or column differs between the entities and a freshly migrated database', async () => {
    expect(columnDifferences(await schemaDiff(db.orm))).toEqual([]);
  });

  test("getUpdateSchemaSQL only drops what the entities do not describe (indexes, foreign keys, checks)", async () => {
    const sql = await db.orm.schema.getUpdateSchemaSQL({ wrap: false });
    const statements = sql
      .split(/;\s*\n/)
      .map((s) => s.trim().replace(/;$/, ''))
      .filter(Boolean);
    expect(statements.length).toBeGreaterThan(0);
    const other = statements.filter((s) => !/^drop index "[a-z_]+"$/.test(s) && !/^alter table "[a-z_]+" drop constraint "?[a-z_]+"?$/.test(s));
    expect(other).toEqual([]);
  });

  test('an entity naming a column the table lacks, or a wrong type, is reported', async () => {
    const p = defineEntity.properties;
    const Wrong = defineEntity({
      name: 'Workspace',
      tableName: 'workspaces',
      properties: { id: p.text().primary(), name: p.string(), nickname: p.text(), createdAt: p.datetime().defaultRaw('now()') },
    });
    const others = allEntities.filter((e) => e.meta.className !== 'Workspace');
    const orm = await MikroORM.init(ormOptions(db.url, { entities: [...others, Wrong], pool: { min: 0, max: 1 } }));
    try {
      const found = columnDifferences(await schemaDiff(orm));
      expect(found).toEqual(
        expect.arrayContaining(['public.workspaces: entity column missing from the table: nickname', expect.stringMatching(/^public\.workspaces: column name differs in .*type/)]),
      );
    } finally {
      await orm.close(true);
    }
  });
});
