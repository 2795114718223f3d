import { runTs } from '../support/cli';
import { newId } from '../../lib/ids';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * Billing: credits granted by the operator's CLI, spent only by voice (402 out_of_credits),
 * the balance never negative under spends racing from two processes; usage by day and kind,
 * priced, with a cursor.
 */
let db: TestDatabase;
let t: TestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const run = (args: string[]) => runTs(args, { env: { DATABASE_URL: db.url } });
const get = (auth: Record<string, string>, url: string) => t.app.inject({ method: 'GET', url, headers: auth });
const q = (sql: string, params: unknown[] = []) => db.orm.em.fork().execute(sql, params);

test('credits: granted with the admin CLI, spent by two processes racing: never negative, each spend once, the rest 402 out_of_credits', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['analytics:read'])).key);
  expect((await get(auth, '/api/v1/billing/credits')).json()).toEqual({ balance: 0, granted: 0, used: 0, updated_at: null });
  const granted = await run(['bin/admin.ts', 'credits', 'grant', '--workspace', ws, '--amount', '20', '--reason', 'pilot']);
  expect(granted.code).toBe(0);
  expect(JSON.parse(granted.stdout)).toMatchObject({ entry: { kind: 'grant', amount: 20, balance_after: 20, reason: 'pilot' }, credits: { balance: 20 } });
  expect((await run(['bin/admin.ts', 'credits', 'grant', '--workspace', ws, '--amount', '-3'])).code).toBe(2);

  const [a, b] = await Promise.all([run(['test/support/spend-credits.ts', ws, '15', 'a']), run(['test/support/spend-credits.ts', ws, '15', 'b'])]);
  const outcomes = [JSON.parse(a.stdout), JSON.parse(b.stdout)];
  expect(outcomes.flatMap((o) => o.errors)).toEqual([]);
  expect(outcomes[0].spent + outcomes[1].spent).toBe(20);
  expect(outcomes[0].refused + outcomes[1].refused).toBe(10);
  expect((await get(auth, '/api/v1/billing/credits')).json()).toMatchObject({ balance: 0, granted: 20, used: 20 });
  const ledger = (await q(`select kind, amount, balance_after from credit_ledger where workspace_id = ? order by created_at`, [ws])) as Array<{ kind: string; balance_after: string }>;
  expect(ledger).toHaveLength(21);
  expect(ledger.every((e) => Number(e.balance_after) >= 0)).toBe(true);
  // The same reference again is the same spend; the ledger is append-only.
  const [spent] = (await q(`select id, reference from credit_ledger where workspace_id = ? and kind = 'spend' limit 1`, [ws])) as Array<{ id: string; reference: string }>;
  await t.services.credits.grant(ws, 1);
  expect((await t.services.credits.spend(ws, 1, 'voice minute', spent.reference)).id).toBe(spent.id);
  expect((await get(auth, '/api/v1/billing/credits')).json()).toMatchObject({ balance: 1, granted: 21, used: 20 });
  await expect(q(`update credit_ledger set amount = 1000 where workspace_id = ?`, [ws])).rejects.toThrow(/append-only/);
});

test('a refund returns one spend, once: the balance and used go back, the ledger keeps both, usage counts the spend net', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['analytics:read'])).key);
  await t.services.credits.grant(ws, 5);
  await t.services.credits.spend(ws, 2, 'voice minute 1', 'vs_x:minute:1');
  await t.services.credits.spend(ws, 2, 'voice minute 1', 'vs_y:minute:1');
  expect(await t.services.credits.refund(ws, 'vs_none:minute:1', 'nothing was spent')).toBeNull();
  const [first, again] = await Promise.all([t.services.credits.refund(ws, 'vs_x:minute:1', 'refund: never connected'), t.services.credits.refund(ws, 'vs_x:minute:1', 'refund: never connected')]);
  expect(first).toMatchObject({ kind: 'refund', amount: 2, balance_after: 3 });
  expect(again!.id).toBe(first!.id);
  expect((await get(auth, '/api/v1/billing/credits')).json()).toMatchObject({ balance: 3, granted: 5, used: 2 });
  const ledger = (await q(`select kind, amount, reference from credit_ledger where workspace_id = ? order by created_at`, [ws])) as Array<{ kind: string; amount: string; reference: string | null }>;
  expect(ledger.map((e) => [e.kind, Number(e.amount), e.reference])).toEqual([
    ['grant', 5, null],
    ['spend', 2, 'vs_x:minute:1'],
    ['spend', 2, 'vs_y:minute:1'],
    ['refund', 2, 'vs_x:minute:1:refund'],
  ]);
  const usage = (await get(auth, '/api/v1/billing/usage')).json();
  expect(usage.usage.filter((u: { kind: string }) => u.kind === 'voice_credits').map((u: { quantity: number }) => u.quantity)).toEqual([2]);
});

test('usage by UTC day and kind, priced at the configured defaults, newest first, with a cursor; scopes and bad input', async () => {
  const ws = await createWorkspace(db.orm);
  const other = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['analytics:read'])).key);
  const use = (w: string, kind: string, at: string, quantity = 1) => q(`insert into usage_records (workspace_id, kind, quantity, created_at) values (?, ?, ?, ?)`, [w, kind, quantity, at]);
  await use(ws, 'msgapp_message', '2026-11-20T10:00:00Z');
  await use(ws, 'msgapp_message', '2026-11-20T23:59:59Z');
  await use(ws, 'structured_extraction', '2026-11-20T12:00:00Z', 3);
  await use(ws, 'msgapp_message', '2026-11-21T00:00:00Z');
  await use(other, 'msgapp_message', '2026-11-21T00:00:00Z');
  await t.services.credits.grant(ws, 5);
  await t.services.credits.spend(ws, 2, 'voice minutes', `call:${newId('req')}`);
  const window = 'from=2026-11-19T00:00:00Z&to=2026-11-22T00:00:00Z';
  const res = await get(auth, `/api/v1/billing/usage?${window}`);
  expect(res.statusCode).toBe(200);
  const all = res.json();
  expect(all).toEqual({
    usage: [
      { day: '2026-11-21', kind: 'msgapp_message', quantity: 1, unit: 'message', unit_price: 0.005, amount: 0.005, currency: 'USD' },
      { day: '2026-11-20', kind: 'msgapp_message', quantity: 2, unit: 'message', unit_price: 0.005, amount: 0.01, currency: 'USD' },
      { day: '2026-11-20', kind: 'structured_extraction', quantity: 3, unit: 'page', unit_price: 0.01, amount: 0.03, currency: 'USD' },
    ],
    next_cursor: null,
  });
  // Today's voice spend shows under today's day.
  const today = new Date().toISOString().slice(0, 10);
  expect((await get(auth, `/api/v1/billing/usage?from=${today}T00:00:00Z`)).json().usage).toEqual([expect.objectContaining({ day: today, kind: 'voice_credits', quantity: 2, currency: 'credits' })]);
  const first = (await get(auth, `/api/v1/billing/usage?${window}&limit=2`)).json();
  expect(first.usage).toHaveLength(2);
  const second = (await get(auth, `/api/v1/billing/usage?${window}&limit=2&cursor=${first.next_cursor}`)).json();
  expect(second).toEqual({ usage: [all.usage[2]], next_cursor: null });
  expect(first.next_cursor).toBe(`2026-11-20.${Buffer.from('msgapp_message').toString('base64url')}`);
  // The cursor's form is the document's pattern: anything else is 400 naming it, any value of that form a position.
  const nonsense = await get(auth, '/api/v1/billing/usage?cursor=nonsense');
  expect([nonsense.statusCode, nonsense.json().message]).toEqual([400, expect.stringMatching(/^querystring\.cursor: /)]);
  expect((await get(auth, `/api/v1/billing/usage?${window}&cursor=9999-99-99.`)).json().usage).toEqual(all.usage);
  expect((await get(auth, `/api/v1/billing/usage?${window}&cursor=2026-11-20.%2F%2F8`)).statusCode).toBe(400);
  expect((await get(auth, `/api/v1/billing/usage?${window}&cursor=0000-00-00.__-_`)).json().usage).toEqual([]);
  // Bounds are RFC 3339 date-times or dates; from must come before to.
  for (const query of ['from=2026-11-22&to=2026-11-21', 'from=yesterday', 'to=2026-11-21T10:00:00']) expect((await get(auth, `/api/v1/billing/usage?${query}`)).statusCode).toBe(400);
  const noScope = bearer((await createKey(t.services, ws, ['conversations:read'])).key);
  expect((await get(noScope, '/api/v1/billing/credits')).statusCode).toBe(403);
});
