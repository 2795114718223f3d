import { Client } from 'pg';
import { newId } from '../../lib/ids';
import { createWorkspace } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * The analytics rollups' counters are sharded by the writing connection (Migration20261129120000AnalyticsShards): two
 * transactions of one workspace that store a transcript message or open a conversation in the same hour do not wait
 * for each other's commit (before, each held the workspace's one counter row until it committed), and the counts
 * read back exact.
 */
let db: TestDatabase;
const clients: Client[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end()));
  await db.drop();
});

/** Two connections whose counters are different shards (pg_backend_pid() % 16): more are opened until two differ. */
async function twoShards(): Promise<[Client, Client]> {
  const byShard = new Map<number, Client>();
  while (byShard.size < 2) {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    clients.push(c);
    const { rows } = await c.query<{ shard: number }>('select analytics_shard() as shard');
    if (!byShard.has(rows[0].shard)) byShard.set(rows[0].shard, c);
  }
  return [...byShard.values()] as [Client, Client];
}

const conversation = (c: Client, ws: string) => {
  const id = newId('conv');
  return c.query(`insert into conversations (id, workspace_id, channel, status) values ($1, $2, 'msgapp', 'open')`, [id, ws]).then(() => id);
};
const message = (c: Client, ws: string, conv: string) =>
  c.query(`insert into chat_messages (id, workspace_id, conversation_id, role, text) values ($1, $2, $3, 'user', 'hello')`, [newId('msg'), ws, conv]);

test('two open transactions of one workspace each open a conversation and store a message in the same hour without waiting for the other; the counts are exact', async () => {
  const ws = await createWorkspace(db.orm);
  const [a, b] = await twoShards();
  await b.query(`set lock_timeout = '2s'`);
  await a.query('begin');
  const convA = await conversation(a, ws);
  await message(a, ws, convA);
  // A still holds what it wrote: B's writes to the same workspace's counters must not wait for its commit.
  await b.query('begin');
  const convB = await conversation(b, ws);
  await message(b, ws, convB);
  await message(b, ws, convB);
  await b.query('commit');
  await a.query('commit');
  const [hours] = (await a.query(`select sum(messages)::int as n, count(*)::int as rows from analytics_message_hours where workspace_id = $1`, [ws])).rows;
  expect(hours).toEqual({ n: 3, rows: 2 });
  const [slots] = (await a.query(`select sum(conversations)::int as n from analytics_conversation_slots where workspace_id = $1`, [ws])).rows;
  expect(slots).toEqual({ n: 2 });
  // A deletion counts down in its own connection's shard: the sum stays exact.
  await b.query(`delete from chat_messages where conversation_id = $1`, [convA]);
  const [after] = (await a.query(`select sum(messages)::int as n from analytics_message_hours where workspace_id = $1`, [ws])).rows;
  expect(after).toEqual({ n: 2 });
});
