import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { consoleAssetRoutes, CONSOLE_CSP } from '../../api/routes/console-assets';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startTestApp, type TestApp } from '../support/app';
import { buildConsoleOnce } from '../support/build';
import { axeScan, CHROMIUM, DESKTOP, PHONE } from '../support/widget-page';

/**
 * The console's web app as people meet it, in a real headless Chromium: served by the real app from its build
 * (console/dist, built here when missing), under its Content-Security-Policy, found by role and name as a person
 * finds things, and scanned by axe (no serious or critical violation) at desktop and phone sizes. One app and one
 * browser for the file.
 */

let db: TestDatabase;
let t: TestApp;
let base: string;
let browser: Browser;

beforeAll(async () => {
  await buildConsoleOnce();
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await db?.drop();
});

/** A page that fails the test on any script error or any Content-Security-Policy refusal it logs. */
async function open(context: BrowserContext, path: string): Promise<{ page: Page; problems: string[] }> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 401/.test(msg.text())) problems.push(`console: ${msg.text()}`);
  });
  await page.goto(`${base}${path}`);
  return { page, problems };
}

describe('serving', () => {
  test('/console/ and every client-side path answer index.html with the policy, no-cache and nosniff; hashed assets are immutable', async () => {
    for (const url of ['/console', '/console/', '/console/keys', '/console/link/lnk_abc']) {
      const res = await fetch(`${base}${url}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('cache-control')).toBe('no-cache');
      expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
    }
    const html = await (await fetch(`${base}/console/`)).text();
    // Nothing inline, nothing from elsewhere: every script and stylesheet is a file under /console/assets/.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    expect(html).not.toMatch(/<style/);
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) {
      expect(asset).toMatch(/^\/console\/assets\/[\w.-]+$/);
      const res = await fetch(`${base}${asset}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    const missing = await fetch(`${base}/console/assets/nothing-here.js`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: string }).error).toBe('not_found');
  });

  test('without a build, /console/ answers 503 console_not_built and says how to build it', async () => {
    const bare = Fastify();
    await bare.register(consoleAssetRoutes, { distDir: '/nonexistent/console/dist' });
    try {
      for (const url of ['/console/', '/console/keys']) {
        const res = await bare.inject({ url });
        expect(res.statusCode).toBe(503);
        expect(res.json()).toEqual({ error: 'console_not_built', message: expect.stringContaining('npm run build') });
      }
    } finally {
      await bare.close();
    }
  });
});

describe('signed out', () => {
  test.each([
    ['desktop', DESKTOP],
    ['phone', PHONE],
  ])('the first page loads under the policy without errors and is axe-clean (%s)', async (_name, viewport) => {
    const context = await browser.newContext({ viewport });
    try {
      const { page, problems } = await open(context, '/console/');
      await page.getByRole('heading', { level: 1 }).waitFor();
      expect(await axeScan(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
