import { runAdminCli } from '../support/cli';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

/**
 * A site's look and language: set by the operator with `site set-appearance` (checked, the
 * options left out unchanged), returned by the widget's init and by `site show`.
 */
let db: TestDatabase;
let t: TestApp;
let site: { site_id: string; site_secret: string };
let other: { site_id: string; site_secret: string };

const ORIGIN = 'https://shop.example';
const DEFAULTS = { brand_color: '#243b6b', position: 'right', launcher_label: null, theme: 'auto', language: 'auto' };

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agent = await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Shop helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN] } } } });
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
  site = await t.services.sites.create(ws, agent.json().id, [ORIGIN]);
  other = await t.services.sites.create(ws, agent.json().id, [ORIGIN]);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const admin = (args: string[]) => runAdminCli(args, { env: { DATABASE_URL: db.url } });
const init = async (siteId: string) => {
  const res = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': siteId, origin: ORIGIN }, payload: {} });
  expect(res.statusCode).toBe(200);
  return res.json().appearance;
};

test('a site nobody styled gets the defaults in init', async () => {
  expect(await init(site.site_id)).toEqual(DEFAULTS);
});

test('site set-appearance sets every option; init and site show return them; another site keeps the defaults', async () => {
  const set = await admin(['site', 'set-appearance', site.site_id, '--brand-color', '#0A7', '--position', 'left', '--launcher-label', ' Help ', '--theme', 'dark', '--language', 'fr']);
  expect(set.code).toBe(0);
  const styled = { brand_color: '#00aa77', position: 'left', launcher_label: 'Help', theme: 'dark', language: 'fr' };
  expect(JSON.parse(set.stdout)).toEqual({ site_id: site.site_id, appearance: styled });
  expect(await init(site.site_id)).toEqual(styled);
  expect(await init(other.site_id)).toEqual(DEFAULTS);
  const shown = await admin(['site', 'show', site.site_id]);
  expect(shown.code).toBe(0);
  expect(JSON.parse(shown.stdout)).toEqual({ site_id: site.site_id, workspace_id: expect.any(String), agent_id: expect.any(String), status: 'active', allowed_origins: [ORIGIN], ui_commands: [], appearance: styled });
  expect(shown.stdout).not.toContain('secret');
});

test('options left out keep their value; an empty label removes it', async () => {
  await admin(['site', 'set-appearance', site.site_id, '--brand-color', '#112233', '--launcher-label', 'Chat with us', '--theme', 'light']);
  const res = await admin(['site', 'set-appearance', site.site_id, '--language', 'ar', '--launcher-label', '']);
  expect(res.code).toBe(0);
  expect(await init(site.site_id)).toEqual({ brand_color: '#112233', position: 'left', launcher_label: null, theme: 'light', language: 'ar' });
});

test.each([
  [['--brand-color', 'blue'], "invalid_request: brand_color: 'blue' is not a hex colour such as #243b6b or #0a7"],
  [['--position', 'top'], "invalid_request: position: 'top' is not one of right, left"],
  [['--theme', 'sepia'], "invalid_request: theme: 'sepia' is not one of light, dark, auto"],
  [['--language', 'it'], "invalid_request: language: 'it' is not one of auto, en, es, fr, de, pt, ar"],
  [['--launcher-label', 'x'.repeat(41)], 'invalid_request: launcher_label: at most 40 characters (got 41)'],
  [['--launcher-label', 'two\nlines'], 'invalid_request: launcher_label: one line of plain text'],
])('a bad value %j is refused with a clear message and changes nothing', async (args, message) => {
  const before = await init(site.site_id);
  const res = await admin(['site', 'set-appearance', site.site_id, '--theme', 'dark', ...args]);
  expect(res.code).toBe(1);
  expect(res.stderr).toContain(message);
  expect(await init(site.site_id)).toEqual(before);
});

test('no option is a usage error; an unknown site is not_found', async () => {
  const none = await admin(['site', 'set-appearance', site.site_id]);
  expect(none.code).toBe(2);
  expect(none.stderr).toContain('give at least one of --brand-color');
  const missing = await admin(['site', 'set-appearance', 'site_000000000000000000000000', '--theme', 'dark']);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain("not_found: No site with id 'site_000000000000000000000000'");
  expect((await admin(['site', 'show', 'site_000000000000000000000000'])).stderr).toContain('not_found');
});

test('the database refuses what the service would (a colour not #rrggbb, a label over 40)', async () => {
  const conn = db.orm.em.getConnection();
  await expect(conn.execute(`update sites set brand_color = 'red' where id = ?`, [site.site_id])).rejects.toThrow(/check/);
  await expect(conn.execute(`update sites set launcher_label = ? where id = ?`, ['x'.repeat(41), site.site_id])).rejects.toThrow(/check/);
});
