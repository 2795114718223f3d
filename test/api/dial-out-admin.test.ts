import { runAdminCli } from '../support/cli';
import { DialOutPolicyRepository } from '../../domain/voice/destinations';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';

/** Workspaces' dial-out policies, read and set as the admin CLI does. */
const dialOutPolicies = new DialOutPolicyRepository();

/** The operator sets a workspace's dial-out destinations with the admin CLI; they live on the workspace row. */
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const admin = (args: string[]) => runAdminCli(args, { env: { DATABASE_URL: db.url } });

test('workspace set-dial-out stores allowed countries and types on the workspace; "all" and "default" restore the defaults; premium-rate is refused', async () => {
  const ws = await createWorkspace(db.orm);
  const set = await admin(['workspace', 'set-dial-out', ws, '--countries', 'us,GB', '--types', 'fixed_line,mobile']);
  expect(set.code).toBe(0);
  expect(JSON.parse(set.stdout)).toEqual({ workspace_id: ws, countries: ['GB', 'US'], types: ['fixed_line', 'mobile'] });
  expect(await dialOutPolicies.dialOutPolicy(db.orm.em, ws)).toEqual({ countries: ['GB', 'US'], types: ['fixed_line', 'mobile'] });
  const refused = await admin(['workspace', 'set-dial-out', ws, '--types', 'premium_rate']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('invalid_request');
  const reset = await admin(['workspace', 'set-dial-out', ws, '--countries', 'all', '--types', 'default']);
  expect(reset.code).toBe(0);
  expect(await dialOutPolicies.dialOutPolicy(db.orm.em, ws)).toEqual({ countries: null, types: ['fixed_line', 'mobile', 'toll_free', 'voip', 'uan'] });
  expect((await admin(['workspace', 'set-dial-out', 'ws_missing', '--countries', 'US'])).stderr).toContain('not_found');
}, 120_000);
