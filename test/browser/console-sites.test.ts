import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { userHash } from '../../domain/widget/sites';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';
import { bearer, createKey, startTestApp, type TestApp } from '../support/app';
import { buildConsoleOnce } from '../support/build';
import { signInWithLink, watchProblems } from '../support/console-page';
import { recordSecret } from '../support/secret-log';
import { axeScan, CHROMIUM, DESKTOP, PHONE } from '../support/widget-page';

/**
 * The console's Sites page in a real headless Chromium, served by the real app from its build under its
 * Content-Security-Policy: an owner adds a site for an agent (the secret once, the snippet to paste and copy), sets its
 * look, requires identity verification, rotates the secret with a grace period, suspends and resumes it; the widget's
 * own API answers accordingly. axe-clean at desktop size and at phone size in the dark palette.
 */

let db: TestDatabase;
let t: TestApp;
let base: string;
let browser: Browser;
let workspaceId: string;
let agentId: string;

const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'console');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
const SHOP = 'https://shop.example';
const OWNER = { email: 'sites-owner@example.com', password: 'correct horse battery staple' };

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
declare const document: any;

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await buildConsoleOnce();
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  workspaceId = await createWorkspace(db.orm, 'Acme shop');
  const auth = bearer((await createKey(t.services, workspaceId, ['workflows:write', 'workflows:publish'])).key);
  const made = await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Shop helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [SHOP], response_delivery: 'complete' } } } });
  agentId = made.json().id;
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agentId}/publish`, headers: auth })).statusCode).toBe(200);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await db?.drop();
});

/** The widget's init from the site's page, as a visitor signed in by the site when `secret` is given. */
const init = (siteId: string, secret?: string) =>
  t.app.inject({
    method: 'POST',
    url: '/api/public/widget/init',
    headers: { 'x-concierge-site': siteId, origin: SHOP },
    payload: secret ? { user_context: { external_id: 'user-7', user_hash: userHash(secret, siteId, 'user-7') } } : {},
  });

/** Whether `text` is anywhere in the page: its markup or the value of any field. */
const inPage = (page: Page, text: string) =>
  page.evaluate((v: string) => document.documentElement.outerHTML.includes(v) || [...document.querySelectorAll('input, textarea')].some((el: any) => el.value.includes(v)), text);

const clipboard = (page: Page) => page.evaluate(() => window.navigator.clipboard.readText());

describe('the Sites page', () => {
  let context: BrowserContext;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    context = await browser.newContext({ viewport: DESKTOP });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    page = await context.newPage();
    watchProblems(page, problems);
    await signInWithLink(page, base, t.services, workspaceId, { ...OWNER, role: 'owner' });
  });
  afterAll(async () => {
    await context?.close();
  });
  afterEach(() => {
    expect(problems).toEqual([]);
  });

  test('an owner adds a site, sees the secret once and the snippet, copies it, sets its look and identity rule, rotates the secret with grace, suspends and resumes', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Sites' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sites' }).waitFor();
    await page.getByText('No sites yet.').waitFor();
    expect(await axeScan(page)).toEqual([]);

    // Add: the agent from the workspace's agents, the origins one per line.
    await page.getByRole('button', { name: 'Add site' }).click();
    const create = page.getByRole('dialog', { name: 'Add a site' });
    await create.getByRole('option', { name: 'Shop helper' }).waitFor({ state: 'attached' });
    await create.getByLabel('Agent').selectOption({ label: 'Shop helper' });
    await create.getByRole('textbox', { name: 'Allowed origins' }).fill(`${SHOP}\nhttps://www.shop.example`);
    expect(await axeScan(page)).toEqual([]);
    await create.getByRole('button', { name: 'Add site' }).click();

    const added = page.getByRole('dialog', { name: 'Site added' });
    const secret = await added.getByRole('textbox', { name: 'Site secret' }).inputValue();
    recordSecret('site secret', secret);
    expect(secret).toMatch(/^sitesec_[0-9a-f]{48}$/);
    const snippet = await added.getByRole('textbox', { name: 'Embed code' }).inputValue();
    const siteId = /data-site-id="(site_[0-9a-f]{24})"/.exec(snippet)?.[1] as string;
    expect(snippet).toBe(`<script src="${new URL('/widget.js', t.services.publicBaseUrl).href}" data-site-id="${siteId}"></script>`);
    await shot(page, 'desktop-site-added');
    expect(await axeScan(page)).toEqual([]);
    await added.getByRole('button', { name: 'Copy embed code' }).click();
    await added.getByText('Embed code copied to the clipboard.').waitFor();
    expect(await clipboard(page)).toBe(snippet);
    await added.getByRole('button', { name: 'Done' }).click();
    await added.waitFor({ state: 'detached' });
    // Once: the list never shows the secret.
    const row = page.getByRole('row', { name: new RegExp(siteId) });
    await row.getByRole('cell', { name: 'Shop helper' }).waitFor();
    expect(await inPage(page, secret)).toBe(false);
    expect((await init(siteId, secret)).json().auth_level).toBe('verified');

    // The site's page: the snippet again, never the secret.
    await row.getByRole('link', { name: siteId }).click();
    await page.getByRole('heading', { level: 1, name: 'Site', exact: true }).waitFor();
    await page.getByRole('definition').filter({ hasText: siteId }).waitFor();
    expect(await page.getByRole('textbox', { name: 'Embed code' }).inputValue()).toBe(snippet);
    expect(await inPage(page, secret)).toBe(false);
    await page.getByRole('switch', { name: 'Require identity verification' }).waitFor();
    await shot(page, 'desktop-site');
    expect(await axeScan(page)).toEqual([]);

    // The look: a light brand colour gets near-black text in the preview, as the widget would paint it.
    await page.getByRole('textbox', { name: 'Brand colour' }).fill('#fd0');
    await page.getByText('Preview: near-black text (#111111) on #ffdd00').waitFor();
    await page.getByRole('textbox', { name: 'Launcher label' }).fill('Ask us');
    await page.getByLabel('Language').selectOption('fr');
    await page.getByRole('button', { name: 'Save appearance' }).click();
    await page.getByRole('status').filter({ hasText: 'Appearance saved.' }).waitFor();
    expect((await init(siteId)).json().appearance).toEqual({ brand_color: '#ffdd00', position: 'right', launcher_label: 'Ask us', theme: 'auto', language: 'fr' });
    expect(await axeScan(page)).toEqual([]);

    // The agent's identity rule, through PATCH /api/v1/agents/{id} with the session.
    await page.getByRole('switch', { name: 'Require identity verification' }).check();
    await page.getByRole('status').filter({ hasText: 'Identity verification is now required.' }).waitFor();
    const unsigned = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': siteId, origin: SHOP }, payload: { user_context: { external_id: 'user-7' } } });
    expect([unsigned.statusCode, unsigned.json().error]).toEqual([403, 'identity_verification_required']);

    // Rotate with a two-hour grace: the new secret once, with Copy; both secrets verify meanwhile.
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const confirm = page.getByRole('dialog', { name: 'Rotate the site secret?' });
    await confirm.getByRole('spinbutton', { name: 'Grace period (hours)' }).fill('2');
    await confirm.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = page.getByRole('dialog', { name: 'Secret rotated' });
    const fresh = await rotated.getByRole('textbox', { name: 'New site secret' }).inputValue();
    recordSecret('site secret', fresh);
    expect(fresh).toMatch(/^sitesec_/);
    expect(fresh).not.toBe(secret);
    expect(await axeScan(page)).toEqual([]);
    await rotated.getByRole('button', { name: 'Copy' }).click();
    await rotated.getByText('Copied to the clipboard.').waitFor();
    expect(await clipboard(page)).toBe(fresh);
    await rotated.getByRole('button', { name: 'Done' }).click();
    await rotated.waitFor({ state: 'detached' });
    await page.getByText(/^Still verifies until /).waitFor();
    expect(await inPage(page, fresh)).toBe(false);
    expect((await init(siteId, fresh)).json().auth_level).toBe('verified');
    expect((await init(siteId, secret)).json().auth_level).toBe('verified');

    // Suspend after a confirmation: the widget is refused; resume: it works again.
    await page.getByRole('button', { name: 'Suspend', exact: true }).click();
    await page.getByRole('dialog', { name: 'Suspend this site?' }).getByRole('button', { name: 'Suspend site' }).click();
    await page.getByRole('status').filter({ hasText: 'Site suspended.' }).waitFor();
    const refused = await init(siteId);
    expect([refused.statusCode, refused.json().error]).toEqual([403, 'site_suspended']);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('status').filter({ hasText: 'Site resumed' }).waitFor();
    expect((await init(siteId)).statusCode).toBe(200);

    // Phone size, dark palette: both pages axe-clean.
    await page.setViewportSize(PHONE);
    await page.emulateMedia({ colorScheme: 'dark' });
    try {
      for (const [at, title] of [
        ['/sites', 'Sites'],
        [`/sites/${siteId}`, 'Site'],
      ]) {
        await page.goto(`${base}/console${at}`);
        await page.getByRole('heading', { level: 1, name: title, exact: true }).waitFor();
        await page.waitForLoadState('networkidle');
        await shot(page, `phone-${at === '/sites' ? 'sites' : 'site'}`);
        expect([at, await axeScan(page)]).toEqual([at, []]);
        // Nothing wider than the phone: no sideways scrolling.
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width);
      }
    } finally {
      await page.setViewportSize(DESKTOP);
      await page.emulateMedia({ colorScheme: 'light' });
    }
  });
});
