import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page, type WebSocketRoute } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm } from '../../dev/fakes/fake-llm';
import { startTestWorker } from '../support/temporal';

/**
 * The prebuilt widget in a real headless Chromium, served by the real app (listening on
 * loopback) with a real Temporal worker running the conversation and a fake
 * OpenAI-compatible LLM over HTTP that streams its answer in timed chunks.
 */

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
declare const document: any;

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const QUESTION = 'When do your stores open?';
const ANSWER = 'Our stores open at nine in the morning, Monday to Saturday.';

let db: TestDatabase;
let llm: Awaited<ReturnType<typeof startFakeLlm>>;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let t: TestApp;
let browser: Browser;
/** One browser profile for the file: its localStorage carries the conversation across pages. */
let context: BrowserContext;
let base: string;
let siteId: string;
let otherSiteId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  // Slow chunks, so the live bubble is visibly streaming for a while.
  llm = await startFakeLlm({ reply: () => ({ text: ANSWER }), chunkDelayMs: 150 });
  const llmSettings = { baseUrl: llm.url, model: 'fake-model' };
  tw = await startTestWorker(db, { llm: llmSettings });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { llm: llmSettings }, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;

  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const created = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Store helper', instructions: 'Answer questions about the stores.', triggers: { web_chat: { allowed_origins: [base], response_delivery: 'stream' } } },
  });
  expect(created.statusCode).toBe(201);
  const agentId = created.json().id;
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agentId}/publish`, headers: auth })).statusCode).toBe(200);
  siteId = (await t.services.sites.create(ws, agentId, [base])).site_id;
  // A site that does not list this page's origin.
  otherSiteId = (await t.services.sites.create(ws, agentId, ['https://shop.example'])).site_id;

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  context = await browser.newContext();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
});

const widget = (page: Page) => page.locator('[data-concierge-widget]');
const bubbles = (page: Page) => widget(page).locator('.log .msg');

async function openDemo(page: Page, query: Record<string, string> = {}): Promise<void> {
  await page.goto(`${base}/demo?${new URLSearchParams({ site_id: siteId, ...query })}`);
  // Ready once init and history are done and the socket is dialled; then the panel is opened
  // (the widget remembers it open for the rest of this profile's pages).
  // The launcher shows (state idle) on a page view; the session starts when the panel opens.
  await page.locator('[data-concierge-widget][data-state]').waitFor({ state: 'attached', timeout: 20_000 });
  if (!(await widget(page).locator('.panel').isVisible())) await widget(page).getByRole('button', { name: 'Open chat' }).click();
  await page.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached', timeout: 20_000 });
}

/** Records the live bubble's text each time a delta arrives, through the widget's public event. */
async function recordDeltas(page: Page): Promise<void> {
  await page.evaluate(() => {
    const w = window as { ConciergeWidget: { on(e: string, fn: (f: { type: string }) => void): void }; seen: string[]; snapshots: string[] };
    w.seen = [];
    w.snapshots = [];
    w.ConciergeWidget.on('message:received', (frame) => {
      w.seen.push(frame.type);
      if (frame.type !== 'reply_delta') return;
      const live = document.querySelector('[data-concierge-widget]')!.shadowRoot!.querySelector('.msg.live');
      w.snapshots.push(live ? (live.textContent ?? '') : '<no live bubble>');
    });
  });
}

describe('prebuilt widget in a browser', () => {
  test('serves /widget.js and /demo', async () => {
    const js = await fetch(`${base}/widget.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('application/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toMatch(/max-age=\d+/);
    expect(await js.text()).toContain('ConciergeWidget');
    const demo = await fetch(`${base}/demo?site_id=${siteId}`);
    expect(demo.status).toBe(200);
    expect(demo.headers.get('content-type')).toBe('text/html; charset=utf-8');
  });

  test('a message is sent, the reply streams into a live bubble then is replaced by the final text, and a reload shows both from history', async () => {
    const page = await context.newPage();
    try {
      await openDemo(page);
      await expect(bubbles(page).count()).resolves.toBe(0);
      await recordDeltas(page);

      await widget(page).getByRole('textbox', { name: 'Message' }).fill(QUESTION);
      await widget(page).getByRole('button', { name: 'Send' }).click();

      // Streaming: a live assistant bubble holds part of the answer, not yet all of it.
      const live = widget(page).locator('.msg.assistant.live');
      await page.waitForFunction(
        (full) => {
          const el = document.querySelector('[data-concierge-widget]')?.shadowRoot?.querySelector('.msg.assistant.live');
          const text = el?.textContent ?? '';
          return text.length > 0 && text.length < full.length;
        },
        ANSWER,
        { timeout: 30_000 },
      );
      expect(ANSWER.startsWith((await live.textContent()) ?? '')).toBe(true);

      // Final: the same bubble, no longer live, with the authoritative text.
      const final = widget(page).locator('.msg.assistant:not(.live)');
      await final.filter({ hasText: ANSWER }).waitFor({ timeout: 30_000 });
      await expect(live.count()).resolves.toBe(0);
      await expect(bubbles(page).allTextContents()).resolves.toEqual([QUESTION, ANSWER]);
      await expect(widget(page).locator('.msg.user').getAttribute('data-id')).resolves.toMatch(/^msg_/);

      // Deltas grew the live bubble step by step, each a prefix of the answer, before the final reply.
      const { seen, snapshots } = await page.evaluate(() => ({ seen: window.seen as string[], snapshots: window.snapshots as string[] }));
      expect(snapshots.length).toBeGreaterThan(1);
      for (let i = 0; i < snapshots.length; i++) {
        expect(ANSWER.startsWith(snapshots[i])).toBe(true);
        if (i > 0) expect(snapshots[i].length).toBeGreaterThan(snapshots[i - 1].length);
      }
      expect(seen.lastIndexOf('reply_delta')).toBeLessThan(seen.indexOf('reply'));
      const llmRequests = llm.requests.length;

      // A reload resumes the same conversation and shows both messages from history.
      const conversationId = await page.evaluate(() => window.ConciergeWidget.conversationId as string);
      await page.reload();
      await widget(page).locator('.msg').nth(1).waitFor();
      await expect(bubbles(page).allTextContents()).resolves.toEqual([QUESTION, ANSWER]);
      await expect(page.evaluate(() => window.ConciergeWidget.conversationId as string)).resolves.toBe(conversationId);
      expect(llm.requests.length).toBe(llmRequests);
    } finally {
      await page.close();
    }
  });

  test('a socket silent for data-silence-ms is replaced by one asking for what came after the last message shown', async () => {
    const page = await context.newPage();
    try {
      const sockets: string[] = [];
      page.on('websocket', (ws) => sockets.push(ws.url()));
      // The profile's localStorage resumes the conversation of the test above, so a message is shown.
      await openDemo(page, { silence_ms: '1500' });
      await bubbles(page).nth(1).waitFor();
      const lastId = await bubbles(page).last().getAttribute('data-id');
      expect(lastId).toBeTruthy();
      const deadline = Date.now() + 10_000;
      while (sockets.length < 2 && Date.now() < deadline) await page.waitForTimeout(100);
      expect(sockets.length).toBeGreaterThanOrEqual(2);
      for (const url of sockets) {
        const u = new URL(url);
        expect(`${u.protocol}//${u.host}${u.pathname}`).toBe(`${base.replace('http:', 'ws:')}/api/chat/connect`);
        expect(u.searchParams.get('site_id')).toBe(siteId);
        expect(u.searchParams.get('after')).toBe(lastId);
      }
    } finally {
      await page.close();
    }
  });

  test('a reply missed while the socket heard nothing is replayed on reconnect (after = last message shown) and shown once', async () => {
    // A fresh profile: a new conversation.
    const fresh = await browser.newContext();
    const page = await fresh.newPage();
    try {
      const urls: string[] = [];
      let deaf: WebSocketRoute | null = null;
      await page.routeWebSocket(/\/api\/chat\/connect/, (ws) => {
        urls.push(ws.url());
        // The first socket "opens" but never reaches the server: a connection that delivers nothing.
        if (!deaf) deaf = ws;
        else ws.connectToServer();
      });
      await openDemo(page);
      await widget(page).getByRole('textbox', { name: 'Message' }).fill(QUESTION);
      await widget(page).getByRole('button', { name: 'Send' }).click();
      const userId = await widget(page).locator('.msg.user[data-id]').getAttribute('data-id');
      expect(userId).toMatch(/^msg_/);

      // The turn runs and its reply is stored while the widget hears nothing.
      const conversationId = await page.evaluate(() => window.ConciergeWidget.conversationId as string);
      const deadline = Date.now() + 30_000;
      const stored = async () =>
        (await db.orm.em.fork().execute<{ text: string }[]>(`select text from chat_messages where conversation_id = ? and role = 'assistant'`, [conversationId]))[0]?.text;
      while (!(await stored()) && Date.now() < deadline) await page.waitForTimeout(100);
      expect(await stored()).toBe(ANSWER);
      await expect(widget(page).locator('.msg.assistant:not(.live)').count()).resolves.toBe(0);

      // The socket drops; the widget dials again asking for what came after its last message.
      await deaf!.close();
      await widget(page).locator('.msg.assistant:not(.live)').filter({ hasText: ANSWER }).waitFor({ timeout: 15_000 });
      expect(urls).toHaveLength(2);
      expect(new URL(urls[1]).searchParams.get('after')).toBe(userId);
      await expect(bubbles(page).allTextContents()).resolves.toEqual([QUESTION, ANSWER]);
    } finally {
      await fresh.close();
    }
  });

  test('a site that does not allow this origin: the widget is not shown, and the console says why', async () => {
    const page = await context.newPage();
    try {
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      // A page view reads only the site's public config (no session yet): refused the same way.
      const init = page.waitForResponse((r) => r.url().endsWith('/api/public/widget/config'));
      await page.goto(`${base}/demo?site_id=${otherSiteId}`);
      expect((await init).status()).toBe(403);
      const deadline = Date.now() + 5_000;
      while (!errors.some((e) => e.includes('Concierge widget hidden')) && Date.now() < deadline) await page.waitForTimeout(50);
      expect(errors.find((e) => e.includes('Concierge widget hidden'))).toMatch(/origin_not_allowed/);
      await expect(widget(page).count()).resolves.toBe(0);
    } finally {
      await page.close();
    }
  });

  test('under the demo page\'s Content-Security-Policy the widget loads, sends and receives, and the browser reports no violation', async () => {
    const fresh = await browser.newContext();
    const page = await fresh.newPage();
    try {
      const refused: string[] = [];
      page.on('console', (m) => {
        if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
      });
      await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e: { violatedDirective: string; blockedURI: string }) => {
          (window.cspViolations ??= []).push(`${e.violatedDirective} ${e.blockedURI}`);
        });
      });
      const res = await page.goto(`${base}/demo?site_id=${siteId}`);
      expect(res!.headers()['content-security-policy']).toContain("script-src 'self'");
      await page.locator('[data-concierge-widget][data-state]').waitFor({ state: 'attached', timeout: 20_000 });
      if (!(await widget(page).locator('.panel').isVisible())) await widget(page).getByRole('button', { name: 'Open chat' }).click();
      await page.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached', timeout: 20_000 });
      await widget(page).getByRole('textbox', { name: 'Message' }).fill(QUESTION);
      await widget(page).getByRole('button', { name: 'Send' }).click();
      await widget(page).locator('.msg.assistant:not(.live)').filter({ hasText: ANSWER }).waitFor({ timeout: 30_000 });
      expect(await page.evaluate(() => (window.cspViolations ?? []) as string[])).toEqual([]);
      expect(refused).toEqual([]);
    } finally {
      await fresh.close();
    }
  });
});
