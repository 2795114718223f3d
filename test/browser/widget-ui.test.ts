import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page, type WebSocketRoute } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm } from '../../dev/fakes/fake-llm';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { axeScan, until } from '../support/widget-page';

/**
 * The prebuilt widget as a visitor meets it, in a real headless Chromium at desktop
 * (1280×800) and phone (390×844) sizes: launcher and panel, greeting, Markdown replies with
 * their sources, reply elements, scrolling, offline and retry, keyboard-only use and an
 * axe-core accessibility scan. The real app, a real Temporal worker and a fake
 * OpenAI-compatible model (scripted below) answer; screenshots go to test-artifacts/widget/.
 */

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
declare const document: any;
declare const getComputedStyle: any;

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'widget');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const GREETING = 'Welcome to the store! Ask me about opening hours, orders or returns.';
const STARTERS = ['What are the store opening hours?', 'Where is my order?'];

const MARKDOWN = [
  'Our **opening hours** are below; see [the store page](https://shop.example/stores) for *details* [1].',
  '',
  '| Day | Opens | Closes |',
  '|---|---|---|',
  '| Mon–Fri | 9:00 | 18:00 |',
  '| Sat | 10:00 | 16:00 |',
  '',
  '- Closed on Sundays',
  '- Holidays may differ',
  '',
  '> Tip: call ahead with `order id` ready.',
  '',
  'Not links: [click](javascript:alert(1)) <img src=x onerror="window.pwned=1">',
].join('\n');
const LONG = Array.from({ length: 40 }, (_, i) => `Paragraph ${i + 1} of a long answer about delivery times and costs.`).join('\n\n');

let failedOnce = false;

/** The fake model: Markdown, elements (tool calls), a long answer, one refusal, or an echo. */
function reply(body: { messages: Array<{ role: string; content: string | null }> }) {
  const last = [...body.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = last?.content ?? '';
  // An answer given with a tool call (chips); after the result the model has nothing more to say.
  if (last?.role === 'tool' && [...body.messages].reverse().find((m) => m.role === 'user')?.content?.includes('when do you close')) return { text: '' };
  if (text.includes('when do you close')) return { text: 'We close at **6 pm** on weekdays.', tool_calls: [{ name: 'suggest_replies', arguments: { suggestions: ['Opening hours on Saturday'] } }] };
  if (last?.role === 'tool') return { text: 'Here is the overview [1].' };
  if (text.includes('opening hours')) return { text: MARKDOWN };
  if (text.includes('overview')) {
    return {
      tool_calls: [
        { name: 'suggest_replies', arguments: { suggestions: ['Track my order', 'Talk to a person'] } },
        {
          name: 'show_card',
          arguments: {
            title: 'Winter sale',
            text: 'Boots at 30% off.',
            image_url: 'https://shop.example/boots.png',
            buttons: [{ label: 'Shop', url: 'https://shop.example/sale' }, { label: 'Tell me more', reply: 'Tell me more about the sale' }],
          },
        },
        { name: 'show_chart', arguments: { type: 'bar', title: 'Orders', labels: ['Sep', 'Oct', 'Nov'], series: [{ name: 'orders', values: [3, 5, 2] }] } },
        { name: 'show_chart', arguments: { type: 'line', title: 'Returns', labels: ['Sep', 'Oct', 'Nov'], series: [{ name: 'returns', values: [1, 0, 2] }, { name: 'exchanges', values: [2, 1, 1] }] } },
        { name: 'show_chart', arguments: { type: 'pie', title: 'Channels', labels: ['Web', 'Store'], series: [{ name: 'share', values: [70, 30] }] } },
      ],
    };
  }
  if (text.includes('everything')) return { text: LONG };
  if (text.includes('please fail') && !failedOnce) {
    failedOnce = true;
    return { status: 400, text: 'bad request' };
  }
  return { text: `You said: ${text}` };
}

let db: TestDatabase;
let llm: Awaited<ReturnType<typeof startFakeLlm>>;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let t: TestApp;
let browser: Browser;
let base: string;
let siteId: string;
let outboundAuth: Record<string, string>;

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply, chunkDelayMs: 15, chunkChars: 24 });
  const llmSettings = { baseUrl: llm.url, model: 'fake-model' };
  tw = await startTestWorker(db, { llm: llmSettings });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { llm: llmSettings }, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;

  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish', 'kb:read', 'kb:write'])).key);
  outboundAuth = bearer((await createKey(t.services, ws, ['conversations:read', 'conversations:write'])).key);
  // One help article: the model's passages come from it, so replies cite it by its title.
  dispatcher = await startIndexDispatcher(tw);
  const file = await upload(t.app, auth, { filename: 'store_opening-hours.md', content: 'Store opening hours: our stores open at nine in the morning, Monday to Saturday.' });
  expect(file.statusCode).toBe(201);
  expect(await indexed(tw, file.json().id)).toBe('active');

  const created = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: {
      name: 'Store helper',
      instructions: 'Answer questions about the stores.',
      triggers: { web_chat: { allowed_origins: [base], response_delivery: 'stream' } },
      actions: [{ type: 'reply_elements', kinds: ['suggested_actions', 'cards', 'charts'] }],
    },
  });
  expect(created.statusCode).toBe(201);
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${created.json().id}/publish`, headers: auth })).statusCode).toBe(200);
  siteId = (await t.services.sites.create(ws, created.json().id, [base])).site_id;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await dispatcher?.stop();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
});

const widget = (page: Page) => page.locator('[data-concierge-widget]');
const panel = (page: Page) => widget(page).locator('.panel');
const launcher = (page: Page) => widget(page).locator('.launcher');
const textbox = (page: Page) => widget(page).getByRole('textbox', { name: 'Message' });
const finals = (page: Page) => widget(page).locator('.msg.assistant:not(.live)');

async function openDemo(page: Page, query: Record<string, string> = {}): Promise<void> {
  await page.goto(`${base}/demo?${new URLSearchParams({ site_id: siteId, greeting: GREETING, starters: STARTERS.join('|'), ...query })}`);
  // A page view shows the launcher (state idle); the session starts on first open, or at once when the panel opens by itself.
  await page.locator(query.open ? '[data-concierge-widget][data-state=ready]' : '[data-concierge-widget][data-state]').waitFor({ state: 'attached', timeout: 20_000 });
}

/** What has focus, inside the widget's shadow root: a selector-like description. */
const focused = (page: Page) =>
  page.evaluate(() => {
    const el = document.querySelector('[data-concierge-widget]')?.shadowRoot?.activeElement;
    return el ? `${el.tagName.toLowerCase()}.${el.className}` : null;
  });

async function say(page: Page, text: string, done: string | RegExp): Promise<void> {
  const before = await finals(page).count();
  await textbox(page).fill(text);
  await textbox(page).press('Enter');
  await finals(page).nth(before).filter({ hasText: done }).waitFor({ timeout: 30_000 });
}

/** A demo page, open, whose chat socket the test pushes frames into as the server would (the real socket stays connected). */
async function pageWithPushedFrames(context: BrowserContext): Promise<{ page: Page; push: (frame: object) => void }> {
  const page = await context.newPage();
  let route: WebSocketRoute | null = null;
  await page.routeWebSocket(/\/api\/chat\/connect/, (ws) => {
    ws.connectToServer();
    route = ws;
  });
  await openDemo(page, { open: '1' });
  await until(async () => route !== null, 'the socket');
  return { page, push: (frame) => route!.send(JSON.stringify(frame)) };
}

const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`) });

describe('the widget at desktop size (1280×800)', () => {
  let context: BrowserContext;
  let page: Page;
  beforeAll(async () => {
    context = await browser.newContext({ viewport: DESKTOP });
    page = await context.newPage();
  });
  afterAll(async () => {
    await context?.close();
  });

  test('a round launcher opens the panel with the greeting and starter questions; open or closed is remembered across reloads', async () => {
    await openDemo(page);
    // Closed on the first visit: only the launcher, round and at least 44 px.
    await expect(panel(page).isVisible()).resolves.toBe(false);
    const box = (await launcher(page).boundingBox())!;
    expect(box.width).toBeGreaterThanOrEqual(44);
    expect(box.height).toBe(box.width);
    expect(parseFloat(await launcher(page).evaluate((el: any) => getComputedStyle(el).borderRadius))).toBeGreaterThanOrEqual(box.height / 2);
    await expect(launcher(page).getAttribute('aria-expanded')).resolves.toBe('false');
    await shot(page, 'desktop-closed');

    await launcher(page).click();
    await panel(page).waitFor();
    await expect(launcher(page).getAttribute('aria-expanded')).resolves.toBe('true');
    // Opening focuses the input; the header names the agent.
    await expect(focused(page)).resolves.toBe('textarea.');
    await expect(widget(page).getByRole('heading').textContent()).resolves.toBe('Store helper');
    const greeting = widget(page).locator('.row.greeting');
    await expect(greeting.locator('.b').textContent()).resolves.toBe(GREETING);
    await expect(greeting.locator('.who').textContent()).resolves.toBe('Store helper');
    await expect(widget(page).locator('.chips button').allTextContents()).resolves.toEqual(STARTERS);
    // Send is disabled while the input is empty; the input is 16 px (no zoom on phones).
    await expect(widget(page).getByRole('button', { name: 'Send' }).isDisabled()).resolves.toBe(true);
    await expect(textbox(page).evaluate((el: any) => getComputedStyle(el).fontSize)).resolves.toBe('16px');
    await shot(page, 'desktop-open-greeting');

    await openDemo(page);
    await panel(page).waitFor();
    await widget(page).getByRole('button', { name: 'Close chat' }).first().click();
    await expect(panel(page).isVisible()).resolves.toBe(false);
    await openDemo(page);
    await expect(panel(page).isVisible()).resolves.toBe(false);
    await launcher(page).click();
    await panel(page).waitFor();
  });

  test('the input grows with its text; Shift+Enter is a new line, Enter sends', async () => {
    const h0 = (await textbox(page).boundingBox())!.height;
    await textbox(page).fill('line one');
    await expect(widget(page).getByRole('button', { name: 'Send' }).isEnabled()).resolves.toBe(true);
    await textbox(page).press('Shift+Enter');
    await textbox(page).pressSequentially('line two');
    await textbox(page).press('Shift+Enter');
    await textbox(page).pressSequentially('line three');
    await expect(textbox(page).inputValue()).resolves.toBe('line one\nline two\nline three');
    expect((await textbox(page).boundingBox())!.height).toBeGreaterThan(h0 + 20);
    await textbox(page).fill('');
    await expect(widget(page).getByRole('button', { name: 'Send' }).isDisabled()).resolves.toBe(true);
  });

  test('a starter question streams a Markdown reply rendered as elements (table, list, quote, https link), with its source chip, announced once', async () => {
    // What screen readers are fed: the announcer's texts, the typing status, the log's own liveness.
    await page.evaluate(() => {
      const root = document.querySelector('[data-concierge-widget]').shadowRoot;
      window.said = [];
      window.typingTexts = [];
      window.dots = [];
      new window.MutationObserver(() => window.said.push(root.querySelector('.say').textContent)).observe(root.querySelector('.say'), { childList: true, characterData: true, subtree: true });
      new window.MutationObserver(() => window.typingTexts.push(root.querySelector('.tstat').textContent)).observe(root.querySelector('.tstat'), { childList: true, characterData: true, subtree: true });
      new window.MutationObserver(() => {
        for (const d of root.querySelectorAll('.live .dots')) window.dots.push(d.getAttribute('aria-hidden'));
      }).observe(root.querySelector('.msgs'), { childList: true, subtree: true });
    });
    const before = await finals(page).count();
    await widget(page).locator('.chips button', { hasText: STARTERS[0] }).click();
    const reply = finals(page).nth(before);
    await reply.locator('table').waitFor({ timeout: 30_000 });
    // Starters are gone once the conversation has begun; the visitor's message is labelled for screen readers.
    await expect(widget(page).locator('.chips').isVisible()).resolves.toBe(false);
    await expect(widget(page).locator('.row.user .who').first().textContent()).resolves.toBe('You');

    await expect(reply.locator('p strong').first().textContent()).resolves.toBe('opening hours');
    await expect(reply.locator('p em').first().textContent()).resolves.toBe('details');
    const a = reply.locator('a');
    await expect(a.count()).resolves.toBe(1);
    await expect(a.getAttribute('href')).resolves.toBe('https://shop.example/stores');
    await expect(a.getAttribute('target')).resolves.toBe('_blank');
    await expect(a.getAttribute('rel')).resolves.toBe('noopener noreferrer');
    await expect(reply.locator('th').allTextContents()).resolves.toEqual(['Day', 'Opens', 'Closes']);
    await expect(reply.locator('tbody tr').count()).resolves.toBe(2);
    await expect(reply.locator('ul li').allTextContents()).resolves.toEqual(['Closed on Sundays', 'Holidays may differ']);
    await expect(reply.locator('blockquote code').textContent()).resolves.toBe('order id');
    // Model text never becomes markup: the javascript: link is plain text, the <img> is text.
    await expect(reply.locator('img').count()).resolves.toBe(0);
    await expect(reply.textContent()).resolves.toContain('<img src=x onerror="window.pwned=1">');
    await expect(page.evaluate(() => window.pwned)).resolves.toBeUndefined();
    // The source: the file's title, not its name.
    const row = widget(page).locator('.row.assistant').last();
    await expect(row.getByRole('list', { name: 'Sources' }).locator('li').allTextContents()).resolves.toEqual(['Store opening hours']);
    // Speaker label and timestamp on hover.
    await expect(row.locator('.who').textContent()).resolves.toBe('Store helper');
    await expect(row.locator('.meta time').getAttribute('title')).resolves.toMatch(/\d/);
    await expect(row.locator('.meta time').textContent()).resolves.toMatch(/\d/);

    // Accessibility: the log is focusable and not itself live; the typing dots were hidden from
    // screen readers while a status said who is typing; the final text was announced once.
    await expect(widget(page).locator('.log').getAttribute('role')).resolves.toBe('log');
    await expect(widget(page).locator('.log').getAttribute('tabindex')).resolves.toBe('0');
    await expect(widget(page).locator('.log').getAttribute('aria-live')).resolves.toBe('off');
    const a11y = await page.evaluate(() => ({ said: window.said, typing: window.typingTexts, dots: window.dots }));
    expect(a11y.dots.length).toBeGreaterThan(0);
    expect(new Set(a11y.dots)).toEqual(new Set(['true']));
    expect(a11y.typing[0]).toBe('Store helper is typing…');
    expect(a11y.typing.at(-1)).toBe('');
    expect(a11y.said).toHaveLength(1);
    expect(a11y.said[0]).toMatch(/^Store helper: Our opening hours are below; see the store page for details\. Day Opens Closes/);
    // Heard as words: no Markdown marks, list bullets or table rules.
    expect(a11y.said[0]).toContain('Closed on Sundays Holidays may differ');
    expect(a11y.said[0]).not.toMatch(/[*_`#|]|\s-\s|--/);
    await shot(page, 'desktop-markdown-reply');
  });

  test('reply elements: suggested actions, a card, bar, line and pie charts as SVG; a chip and a card button send their text', async () => {
    await say(page, 'Can I get an overview?', 'Here is the overview.');
    const row = widget(page).locator('.row.assistant').last();
    await expect(widget(page).locator('.chips button').allTextContents()).resolves.toEqual(['Track my order', 'Talk to a person']);
    const cardEl = widget(page).locator('.card').last();
    await expect(cardEl.locator('.ct').textContent()).resolves.toBe('Winter sale');
    await expect(cardEl.locator('p').textContent()).resolves.toBe('Boots at 30% off.');
    await expect(cardEl.locator('img').getAttribute('src')).resolves.toBe('https://shop.example/boots.png');
    const shop = cardEl.getByRole('link', { name: 'Shop' });
    await expect(shop.getAttribute('href')).resolves.toBe('https://shop.example/sale');
    await expect(shop.getAttribute('rel')).resolves.toBe('noopener noreferrer');
    // Charts: inline SVG drawn from the data, described for screen readers.
    const charts = row.locator('figure.chart');
    await expect(charts.locator('figcaption').allTextContents()).resolves.toEqual(['Orders', 'Returns', 'Channels']);
    const bar = charts.nth(0).locator('svg');
    await expect(bar.getAttribute('role')).resolves.toBe('img');
    await expect(bar.getAttribute('aria-label')).resolves.toBe('Orders, bar chart: Sep 3, Oct 5, Nov 2');
    const heights = await bar.locator('rect').evaluateAll((rs: any[]) => rs.map((r) => Number(r.getAttribute('height'))));
    expect(heights).toHaveLength(3);
    expect(heights[1]).toBeGreaterThan(heights[0]);
    expect(heights[0]).toBeGreaterThan(heights[2]);
    await expect(charts.nth(1).locator('svg polyline').count()).resolves.toBe(2);
    await expect(charts.nth(1).locator('.legend li').allTextContents()).resolves.toEqual(['returns', 'exchanges']);
    await expect(charts.nth(2).locator('svg path').count()).resolves.toBe(2);
    await expect(charts.nth(2).locator('.legend li').allTextContents()).resolves.toEqual(['Web (70)', 'Store (30)']);
    await expect(row.locator('script, foreignObject').count()).resolves.toBe(0);
    await shot(page, 'desktop-elements');

    const before = await finals(page).count();
    await widget(page).locator('.chips button', { hasText: 'Track my order' }).click();
    await finals(page).nth(before).filter({ hasText: 'You said: Track my order' }).waitFor({ timeout: 30_000 });
    await cardEl.getByRole('button', { name: 'Tell me more' }).click();
    await finals(page).nth(before + 1).filter({ hasText: 'You said: Tell me more about the sale' }).waitFor({ timeout: 30_000 });
    await expect(widget(page).locator('.msg.user').last().textContent()).resolves.toBe('Tell me more about the sale');

    // From history after a reload: the same card, charts and sources.
    await openDemo(page);
    const again = widget(page).locator('.row.assistant', { has: page.locator('.card') });
    await again.waitFor();
    await expect(again.locator('figure.chart svg').count()).resolves.toBe(3);
    await expect(again.getByRole('list', { name: 'Sources' }).locator('li').allTextContents()).resolves.toEqual(['Store opening hours']);
    await expect(again.getByRole('link', { name: 'Shop' }).getAttribute('href')).resolves.toBe('https://shop.example/sale');
  });

  test('an answer the model gave together with a tool call stays on screen with its chips, and after a reload', async () => {
    await say(page, 'when do you close?', 'We close at 6 pm on weekdays.');
    const row = finals(page).last();
    await expect(row.locator('strong').textContent()).resolves.toBe('6 pm');
    await expect(widget(page).locator('.chips button').allTextContents()).resolves.toEqual(['Opening hours on Saturday']);
    await openDemo(page);
    await widget(page).locator('.msg.assistant', { hasText: 'We close at 6 pm on weekdays.' }).waitFor();
  });

  test('a new reply is brought in from its top; scrolled up, the visitor is not moved and a "new message" pill appears', async () => {
    const log = widget(page).locator('.log');
    await say(page, 'Tell me everything about delivery', 'Paragraph 40');
    // The long reply's first line is at the top of the log, not its last line at the bottom.
    const pos = await log.evaluate((el: any) => {
      const row = el.querySelector('.row.assistant:last-child');
      return { top: el.scrollTop, rowTop: row.offsetTop, max: el.scrollHeight - el.clientHeight };
    });
    expect(Math.abs(pos.top - (pos.rowTop - 8))).toBeLessThanOrEqual(2);
    expect(pos.max - pos.top).toBeGreaterThan(200);

    // Scrolled up: a message from a person arrives; the visitor stays where they are.
    await log.evaluate((el: any) => { el.scrollTop = 0; });
    const conversationId = await page.evaluate(() => window.ConciergeWidget.conversationId);
    const out = await t.app.inject({ method: 'POST', url: '/api/v1/outbound', headers: outboundAuth, payload: { channel: 'web', conversation_id: conversationId, text: 'Hi, this is Sam from the store team.' } });
    expect(out.statusCode).toBe(201);
    const pill = widget(page).getByRole('button', { name: '↓ New message' });
    await pill.waitFor();
    await expect(log.evaluate((el: any) => el.scrollTop)).resolves.toBe(0);
    const human = widget(page).locator('.row.assistant').last();
    await expect(human.locator('.who').textContent()).resolves.toBe('Support team');
    await expect(human.locator('.b').textContent()).resolves.toBe('Hi, this is Sam from the store team.');
    await shot(page, 'desktop-new-message-pill');
    await pill.click();
    await expect(pill.isVisible()).resolves.toBe(false);
    await expect(human.isVisible()).resolves.toBe(true);
    const atHuman = await log.evaluate((el: any) => ({ top: el.scrollTop, max: el.scrollHeight - el.clientHeight }));
    expect(atHuman.max - atHuman.top).toBeLessThan(5);
  });

  test('offline: "Reconnecting…", a send fails with friendly text and keeps it; Retry sends the same client_message_id and is answered', async () => {
    const sends: Array<{ client_message_id: string; text: string }> = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/api/public/widget/send')) sends.push(JSON.parse(r.postData() ?? '{}'));
    });
    await context.setOffline(true);
    const conn = widget(page).locator('.conn');
    await conn.filter({ hasText: 'Reconnecting…' }).waitFor();
    await textbox(page).fill('Are you still there?');
    await textbox(page).press('Enter');
    const mine = widget(page).locator('.row.user.failed');
    await mine.waitFor();
    await expect(mine.locator('.b').textContent()).resolves.toBe('Are you still there?');
    await expect(mine.getByRole('alert').textContent()).resolves.toBe('You seem to be offline. Check your connection, then retry.');
    await shot(page, 'desktop-offline-retry');

    await context.setOffline(false);
    await conn.waitFor({ state: 'hidden', timeout: 15_000 });
    const before = await finals(page).count();
    await mine.getByRole('button', { name: 'Retry' }).click();
    await finals(page).nth(before).filter({ hasText: 'You said: Are you still there?' }).waitFor({ timeout: 30_000 });
    await expect(widget(page).locator('.row.user.failed').count()).resolves.toBe(0);
    expect(sends.length).toBeGreaterThanOrEqual(2);
    expect(new Set(sends.map((s) => s.client_message_id)).size).toBe(1);
    expect(sends.every((s) => s.text === 'Are you still there?')).toBe(true);
    // Shown once, though sent twice.
    await expect(widget(page).locator('.msg.user', { hasText: 'Are you still there?' }).count()).resolves.toBe(1);
  });

  test('a turn that fails: friendly text on the message, and Retry sends the same message again: stored once, answered once', async () => {
    const sends: Array<{ client_message_id: string; text: string }> = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/api/public/widget/send')) sends.push(JSON.parse(r.postData() ?? '{}'));
    });
    await textbox(page).fill('please fail, then answer');
    await textbox(page).press('Enter');
    const mine = widget(page).locator('.row.user', { hasText: 'please fail, then answer' });
    await mine.getByRole('alert').filter({ hasText: 'Sorry, something went wrong while answering. Please try again.' }).waitFor({ timeout: 30_000 });
    await expect(widget(page).locator('.msg.live').count()).resolves.toBe(0);
    const before = await finals(page).count();
    await mine.getByRole('button', { name: 'Retry' }).click();
    await finals(page).nth(before).filter({ hasText: 'You said: please fail, then answer' }).waitFor({ timeout: 30_000 });
    await expect(mine.getByRole('alert').count()).resolves.toBe(0);
    // The retry is the same message (same client_message_id, same bubble); the server ran its turn again.
    expect(sends.map((x) => x.text)).toEqual(['please fail, then answer', 'please fail, then answer']);
    expect(sends[1].client_message_id).toBe(sends[0].client_message_id);
    await expect(mine.count()).resolves.toBe(1);
    // The model read the question once, not twice.
    const asked = llm.requests.at(-1)!.body.messages.filter((m: { role: string; content: string }) => m.role === 'user' && m.content === 'please fail, then answer');
    expect(asked).toHaveLength(1);
    // After a reload the history has the question once and its answer once.
    await openDemo(page);
    await widget(page).locator('.msg.assistant', { hasText: 'You said: please fail, then answer' }).waitFor();
    await expect(widget(page).locator('.row.user', { hasText: 'please fail, then answer' }).count()).resolves.toBe(1);
    await expect(widget(page).locator('.msg.assistant', { hasText: 'You said: please fail, then answer' }).count()).resolves.toBe(1);
  });

  test('axe-core finds no serious or critical violations at desktop size', async () => {
    await expect(axeScan(page)).resolves.toEqual([]);
  });
});

describe('the widget at phone size (390×844)', () => {
  test('a full-screen sheet; keyboard only: Tab to the launcher, Enter opens, Enter sends, Escape closes and returns focus; axe finds nothing serious', async () => {
    const context = await browser.newContext({ viewport: PHONE });
    try {
      const page = await context.newPage();
      await openDemo(page);
      await shot(page, 'phone-closed');
      for (let i = 0; i < 10 && (await focused(page)) !== 'button.launcher'; i++) await page.keyboard.press('Tab');
      await expect(focused(page)).resolves.toBe('button.launcher');
      await page.keyboard.press('Enter');
      await panel(page).waitFor();
      await expect(focused(page)).resolves.toBe('textarea.');
      // The sheet covers the screen; the launcher steps aside (the header has Close).
      await expect(panel(page).boundingBox()).resolves.toEqual({ x: 0, y: 0, ...PHONE });
      await expect(launcher(page).isVisible()).resolves.toBe(false);

      await page.keyboard.type('What are the store opening hours?');
      await page.keyboard.press('Enter');
      await finals(page).first().locator('table').waitFor({ timeout: 30_000 });
      await expect(textbox(page).inputValue()).resolves.toBe('');
      await shot(page, 'phone-markdown-reply');
      await expect(axeScan(page)).resolves.toEqual([]);

      await page.keyboard.press('Escape');
      await expect(panel(page).isVisible()).resolves.toBe(false);
      await expect(focused(page)).resolves.toBe('button.launcher');
      await expect(launcher(page).getAttribute('aria-expanded')).resolves.toBe('false');
    } finally {
      await context.close();
    }
  });
});

describe('frames pushed on the socket', () => {
  test('attachments render as links (never javascript:), a ui:command frame reaches ConciergeWidget.on, an unsolicited reply is announced', async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    try {
      const { page, push } = await pageWithPushedFrames(context);
      await page.evaluate(() => {
        window.commands = [];
        window.ConciergeWidget.on('ui:command', (c: unknown) => window.commands.push(c));
      });
      push({
          type: 'reply',
          reply_id: 'msg_pushed',
          text: 'Here is your **invoice**.',
          attachments: [
            { file_name: 'invoice-2026-11.pdf', file_url: 'https://files.example/invoice.pdf', mime_type: 'application/pdf' },
            { file_name: 'evil', file_url: 'javascript:alert(1)' },
          ],
          unsolicited: true,
      });
      push({ type: 'ui:command', command: 'navigate', args: { path: '/checkout' } });
      const row = widget(page).locator('.row.assistant', { hasText: 'Here is your invoice.' });
      await row.waitFor();
      const links = row.getByRole('list', { name: 'Attachments' }).getByRole('link');
      await expect(links.allTextContents()).resolves.toEqual(['invoice-2026-11.pdf']);
      await expect(links.getAttribute('href')).resolves.toBe('https://files.example/invoice.pdf');
      await expect(widget(page).locator('.say').textContent()).resolves.toBe('Store helper: Here is your invoice.');
      await until(async () => (await page.evaluate(() => window.commands.length)) > 0, 'the ui:command event');
      await expect(page.evaluate(() => window.commands)).resolves.toEqual([{ command: 'navigate', args: { path: '/checkout' } }]);
      // Closed, a new message puts a dot on the launcher and says so; opening clears it.
      await widget(page).getByRole('button', { name: 'Close chat' }).first().click();
      push({ type: 'reply', reply_id: 'msg_pushed_2', text: 'Anything else?', unsolicited: true });
      const badge = widget(page).getByRole('button', { name: 'Open chat (new message)' });
      await badge.waitFor();
      await expect(badge.evaluate((el: any) => el.classList.contains('unread'))).resolves.toBe(true);
      await badge.click();
      await expect(launcher(page).getAttribute('aria-label')).resolves.toBe('Minimize chat');
      await expect(launcher(page).evaluate((el: any) => el.classList.contains('unread'))).resolves.toBe(false);
    } finally {
      await context.close();
    }
  });
});

describe('two tabs of one conversation', () => {
  test('a message sent in one tab shows in the other as the visitor\'s own, before its answer, once', async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    try {
      const first = await context.newPage();
      await openDemo(first, { open: '1' });
      const second = await context.newPage();
      await openDemo(second, { open: '1' });
      await say(first, 'sent from the first tab', 'You said: sent from the first tab');
      const answer = widget(second).locator('.row.assistant', { hasText: 'You said: sent from the first tab' });
      await answer.waitFor({ timeout: 30_000 });
      const mine = widget(second).locator('.row.user', { hasText: 'sent from the first tab' });
      await mine.waitFor();
      await expect(mine.count()).resolves.toBe(1);
      // Shown as the visitor's (not the agent's), just before its answer.
      await expect(mine.locator('.msg.user').count()).resolves.toBe(1);
      const order = await widget(second).locator('.row').evaluateAll((rows: any[]) => rows.map((r) => r.textContent));
      const at = order.findIndex((t: string) => t.includes('sent from the first tab') && !t.includes('You said'));
      expect(order[at + 1]).toContain('You said: sent from the first tab');
      // The sending tab shows its message once.
      await expect(widget(first).locator('.row.user', { hasText: 'sent from the first tab' }).count()).resolves.toBe(1);
      expect(await axeScan(second)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('a turn that streams again', () => {
  test('a delta with reset (the retry after a cut stream) starts the live bubble over instead of appending to the partial answer', async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    try {
      const { page, push } = await pageWithPushedFrames(context);
      const live = widget(page).locator('.msg.assistant.live');
      push({ type: 'reply_delta', reply_id: 'msg_again', text: 'This answer ' });
      push({ type: 'reply_delta', reply_id: 'msg_again', text: 'breaks' });
      await live.filter({ hasText: 'This answer breaks' }).waitFor();
      push({ type: 'reply_delta', reply_id: 'msg_again', text: 'The whole ', reset: true });
      push({ type: 'reply_delta', reply_id: 'msg_again', text: 'answer.' });
      await live.filter({ hasText: 'The whole answer.' }).waitFor();
      await expect(live.textContent()).resolves.not.toContain('breaks');
      push({ type: 'reply', reply_id: 'msg_again', text: 'The whole answer.' });
      await finals(page).filter({ hasText: 'The whole answer.' }).waitFor();
      await expect(widget(page).locator('.row.assistant', { hasText: 'breaks' }).count()).resolves.toBe(0);
    } finally {
      await context.close();
    }
  });
});

describe('a site the widget cannot serve', () => {
  test('an unknown site id: the widget hides and says why in the console', async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      await page.goto(`${base}/demo?site_id=site_unknown`);
      await until(async () => errors.some((e) => e.includes('Concierge widget hidden')), 'the console message');
      expect(errors.find((e) => e.includes('Concierge widget hidden'))).toMatch(/unknown_site/);
      await expect(widget(page).count()).resolves.toBe(0);
    } finally {
      await context.close();
    }
  });
});
