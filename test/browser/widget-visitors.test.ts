import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm } from '../../dev/fakes/fake-llm';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import { userHash } from '../../domain/widget/sites';
import { axeScan as scan, CHROMIUM, DESKTOP, finals, launcher, panel, PHONE, textbox, until as waitUntil, widget } from '../support/widget-page';

/**
 * The widget, part 2, as visitors meet it in headless Chromium: page views that open no conversation, the agent's own
 * greeting, a hand-off people understand (no typing dots while a person holds the conversation, a status line, the
 * person's name and picture, an email left when nobody is available), signed-in visitors with their past
 * conversations and a shutdown that forgets them, files by drag and drop, a right-to-left page and an Arabic answer,
 * a dark page, the phone sheet's focus trap, thumbs and a rating, visible times. axe on every state.
 */

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
declare const document: any;
declare const getComputedStyle: any;
declare const DataTransfer: any;
declare const File: any;
declare const DragEvent: any;
declare const localStorage: any;

/** A 4×4 teal square: the human agent's picture. */
const AVATAR = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEklEQVR4nGNgYPj/nwEVMNBEAABmKg/x1lZ1OAAAAABJRU5ErkJggg==', 'base64');
/** Screenshots of each state, for a person to look at (test-artifacts/widget/, beside widget-ui's). */
const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'widget');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `visitors-${name}.png`) });
const ARABIC = 'مرحبا! متاجرنا تفتح في التاسعة صباحا.';

/** The fake model: a hand-off on request, Arabic on request, else an echo (with what was attached). */
function reply(body: { messages: Array<{ role: string; content: string | null }> }) {
  const last = [...body.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = last?.content ?? '';
  if (last?.role === 'tool') return { text: 'A teammate will take it from here.' };
  if (text.includes('a person')) return { tool_calls: [{ name: 'handoff', arguments: { reason: 'asked for a person' } }] };
  if (text.includes('بالعربية')) return { text: ARABIC };
  // The answer marks the passage it used: the reply cites that document, with a link when it may be handed out.
  if (text.includes('return boots')) return { text: 'Boots can be returned within 30 days of delivery [1].' };
  return { text: `You said: ${text.split('\n')[0]}` };
}

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: Awaited<ReturnType<typeof startFakeLlm>>;
let browser: Browser;
let base: string;
let site: { site_id: string; site_secret: string };
let ops: Record<string, string>;

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply, chunkDelayMs: 10, chunkChars: 16 });
  const llmSettings = { baseUrl: llm.url, model: 'fake-model' };
  tw = await startTestWorker(db, { llm: llmSettings });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { llm: llmSettings }, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish', 'kb:read', 'kb:write'])).key);
  // One help article the agent answers from (selected: a visitor may download it).
  const dispatcher = await startIndexDispatcher(tw);
  const file = await upload(t.app, auth, { filename: 'returns_v2.md', content: '# Returns and refunds\n\nBoots can be returned within 30 days of delivery for a full refund.' });
  expect(file.statusCode).toBe(201);
  expect(await indexed(tw, file.json().id)).toBe('active');
  await dispatcher.stop();
  ops = bearer((await createKey(t.services, ws, ['conversations:read', 'conversations:write', 'customers:read', 'analytics:read'])).key);
  const created = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: {
      name: 'Store helper',
      instructions: 'Answer questions about the stores.',
      triggers: {
        web_chat: {
          allowed_origins: [base],
          file_upload: true,
          greeting: 'Hello from the store team! Ask about hours, orders or returns.',
          starters: ['Where is my order?', 'Can I return boots?'],
        },
      },
      knowledge_base: { file_ids: [file.json().id] },
      actions: [{ type: 'handoff', message: 'A teammate will take it from here.' }],
    },
  });
  expect(created.statusCode).toBe(201);
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${created.json().id}/publish`, headers: auth })).statusCode).toBe(200);
  site = await t.services.sites.create(ws, created.json().id, [base]);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
});

const api = (method: 'GET' | 'PUT' | 'PATCH' | 'POST', url: string, payload?: object) => t.app.inject({ method, url, headers: ops, payload });

async function demo(page: Page, query: Record<string, string> = {}): Promise<void> {
  await page.goto(`${base}/demo?${new URLSearchParams({ site_id: site.site_id, ...query })}`);
  await page.locator('[data-concierge-widget][data-state]').waitFor({ state: 'attached', timeout: 20_000 });
}
async function openPanel(page: Page): Promise<void> {
  if (!(await panel(page).isVisible())) await launcher(page).click();
  await page.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached', timeout: 20_000 });
}
const until = (fn: () => Promise<boolean>, what: string, ms = 15_000) => waitUntil(fn, what, ms);
async function say(page: Page, text: string): Promise<void> {
  await textbox(page).fill(text);
  await textbox(page).press('Enter');
}
/** axe-core on the widget alone: the host page's own content (a dark demo page) is not ours to judge. */
const axeScan = (page: Page) => scan(page, 'widget');
const conversationCount = async () => (await api('GET', '/api/v1/conversations?limit=100')).json().conversations.length as number;
const widgetConversation = (page: Page) => page.evaluate(() => window.ConciergeWidget.conversationId as string | null);
async function withPage<T>(viewport: { width: number; height: number }, fn: (page: Page, context: BrowserContext) => Promise<T>): Promise<T> {
  const context = await browser.newContext({ viewport });
  try {
    return await fn(await context.newPage(), context);
  } finally {
    await context.close();
  }
}

describe('a page view', () => {
  test('opens no conversation: the launcher shows from /config; the first open starts one, with the agent\'s greeting and starter questions', async () => {
    await withPage(DESKTOP, async (page) => {
      const before = await conversationCount();
      await demo(page);
      await expect(launcher(page).isVisible()).resolves.toBe(true);
      await expect(widget(page).getAttribute('data-state')).resolves.toBe('idle');
      await page.reload();
      await demo(page);
      expect(await conversationCount()).toBe(before);
      await openPanel(page);
      expect(await conversationCount()).toBe(before + 1);
      await expect(widget(page).locator('.greeting').textContent()).resolves.toContain('Hello from the store team! Ask about hours, orders or returns.');
      await expect(widget(page).locator('.chips button').allTextContents()).resolves.toEqual(['Where is my order?', 'Can I return boots?']);
      // The launcher's name and the header's close button are told apart.
      await expect(launcher(page).getAttribute('aria-label')).resolves.toBe('Minimize chat');
      await expect(widget(page).getByRole('button', { name: 'Close chat' }).count()).resolves.toBe(1);
      // A reload resumes it: still one conversation.
      await page.reload();
      await demo(page);
      await openPanel(page);
      expect(await conversationCount()).toBe(before + 1);
    });
  });
});

describe('a hand-off people understand', () => {
  test('while a person holds the conversation: a status line, no typing dots (also after a reload), the person\'s name and picture; handed back, the agent answers', async () => {
    await withPage(DESKTOP, async (page) => {
      await demo(page, { open: '1' });
      await openPanel(page);
      await say(page, 'I want a person please');
      await finals(page).filter({ hasText: 'A teammate will take it from here.' }).waitFor({ timeout: 30_000 });
      const status = widget(page).locator('.hsl');
      await status.filter({ hasText: 'A teammate will reply here.' }).waitFor();
      await expect(status.getAttribute('role')).resolves.toBe('status');

      await say(page, 'hello? is anyone there?');
      await widget(page).locator('.row.user .msg[data-id]', { hasText: 'hello? is anyone there?' }).waitFor();
      // The held turn ends on the server (its handoff frame): no dots, nothing "typing".
      await page.waitForTimeout(1500);
      await expect(widget(page).locator('.live, .dots').count()).resolves.toBe(0);
      await expect(widget(page).locator('.tstat').textContent()).resolves.toBe('');
      await page.reload();
      await demo(page);
      await openPanel(page);
      await status.filter({ hasText: 'A teammate will reply here.' }).waitFor();
      await say(page, 'still waiting');
      await widget(page).locator('.row.user .msg[data-id]', { hasText: 'still waiting' }).waitFor();
      await page.waitForTimeout(1000);
      await expect(widget(page).locator('.live, .dots').count()).resolves.toBe(0);
      expect(await axeScan(page)).toEqual([]);
      await shot(page, 'handoff-status');

      const id = await widgetConversation(page);
      // The person's picture, served where its https URL points (the browser loads it; the server never does).
      await page.route('https://cdn.example/sam.png', (route) => route.fulfill({ status: 200, contentType: 'image/png', body: AVATAR }));
      const out = await api('POST', '/api/v1/outbound', { channel: 'web', conversation_id: id!, text: 'Hi, Sam here. Your order ships today.', author_name: 'Sam Rivera', author_avatar_url: 'https://cdn.example/sam.png' });
      expect(out.statusCode).toBe(201);
      const human = widget(page).locator('.row.assistant', { hasText: 'Your order ships today.' });
      await human.waitFor();
      await expect(human.locator('.who').textContent()).resolves.toBe('Sam Rivera');
      await expect(human.locator('.who img').getAttribute('src')).resolves.toBe('https://cdn.example/sam.png');
      await until(async () => (await human.locator('.who img').evaluate((el: any) => el.complete && el.naturalWidth)) > 0, 'the picture to load');
      await expect(widget(page).locator('.say').textContent()).resolves.toBe('Sam Rivera: Hi, Sam here. Your order ships today.');
      // No thumbs under a person's message (they rate the agent's answers).
      await expect(human.locator('.fb').count()).resolves.toBe(0);
      await shot(page, 'handoff-person-replies');

      await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: false });
      await until(async () => widget(page).locator('.hs').isHidden(), 'the status line to go');
      await say(page, 'thanks');
      await finals(page).filter({ hasText: 'You said: thanks' }).waitFor({ timeout: 30_000 });
    });
  });

  test('nobody available (the team is away): the status says when it is back and the visitor leaves an email, stored unverified on the customer', async () => {
    const away = await api('PUT', '/api/v1/team/availability', { away: true, away_message: 'We are away for the holidays.' });
    expect(away.statusCode).toBe(200);
    try {
      await withPage(DESKTOP, async (page) => {
        await demo(page, { open: '1' });
        await openPanel(page);
        const id = (await widgetConversation(page))!;
        await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: true });
        const status = widget(page).locator('.hsl');
        await status.filter({ hasText: 'We are away for the holidays.' }).waitFor();
        await expect(status.textContent()).resolves.toContain('Leave your email and we will answer here.');
        const email = widget(page).getByRole('textbox', { name: 'Your email' });
        await email.fill('not an email');
        await widget(page).getByRole('button', { name: 'Save' }).click();
        await expect(email.getAttribute('aria-invalid')).resolves.toBe('true');
        await shot(page, 'away-email-form');
        await expect(widget(page).getByRole('alert').first().textContent()).resolves.toBe('Please enter a valid email address.');
        await email.fill('Ana@Example.com');
        await widget(page).getByRole('button', { name: 'Save' }).click();
        await status.filter({ hasText: 'Thanks! We will answer here, and may write to ana@example.com.' }).waitFor();
        await expect(email.isVisible()).resolves.toBe(false);
        expect(await axeScan(page)).toEqual([]);
        const conv = (await api('GET', `/api/v1/conversations/${id}`)).json();
        const customer = (await api('GET', `/api/v1/customers/${conv.customer_id}`)).json();
        expect(customer.metadata).toMatchObject({ unverified: { email: 'ana@example.com' } });
        const events = (await api('GET', `/api/v1/conversations/${id}/events`)).json().events;
        expect(events.map((e: { type: string }) => e.type)).toContain('contact_email');
      });
    } finally {
      await api('PUT', '/api/v1/team/availability', { away: false, away_message: null });
    }
  });
});

describe('a signed-in visitor', () => {
  test('sees their past conversations (title, plain-text preview), goes back to one, starts a new one; shutdown() forgets them on a shared device', async () => {
    await withPage(DESKTOP, async (page) => {
      const identity = { user_id: 'customer-42', user_hash: userHash(site.site_secret, site.site_id, 'customer-42') };
      await demo(page, { ...identity, open: '1' });
      await openPanel(page);
      await say(page, 'first question about **boots**');
      await finals(page).filter({ hasText: 'You said: first question about' }).waitFor({ timeout: 30_000 });
      const first = await widgetConversation(page);

      const list = widget(page).getByRole('button', { name: 'Your conversations' });
      await list.click();
      await widget(page).getByRole('button', { name: 'New conversation' }).click();
      await until(async () => (await widgetConversation(page)) !== first, 'a new conversation');
      await expect(finals(page).count()).resolves.toBe(0);
      await say(page, 'second question');
      await finals(page).filter({ hasText: 'You said: second question' }).waitFor({ timeout: 30_000 });
      // A verified visitor's upload carries their proof: accepted, not refused as someone else's conversation.
      await page.evaluate(() => {
        const dt = new DataTransfer();
        dt.items.add(new File(['Size 42 please.'], 'size.txt', { type: 'text/plain' }));
        const target = document.querySelector('[data-concierge-widget]').shadowRoot.querySelector('.log');
        for (const kind of ['dragenter', 'dragover', 'drop']) target.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true, composed: true }));
      });
      const chip = widget(page).locator('.files li', { hasText: 'size.txt' });
      await chip.waitFor();
      await until(async () => (await chip.locator('progress').count()) === 0, 'the verified upload');
      await expect(chip.evaluate((el: any) => el.className)).resolves.not.toContain('bad');


      await list.click();
      const items = widget(page).locator('.convs li button');
      await until(async () => (await items.count()) === 2, 'two conversations');
      await expect(items.first().locator('span').first().textContent()).resolves.toBe('You said: second question');
      const older = items.nth(1);
      await expect(older.locator('b').textContent()).resolves.toContain('first question about');
      // The preview is plain text: no Markdown marks.
      await expect(older.locator('span').first().textContent()).resolves.toBe('You said: first question about boots');
      await shot(page, 'signed-in-conversations');
      expect(await axeScan(page)).toEqual([]);
      await older.click();
      await finals(page).filter({ hasText: 'You said: first question about' }).waitFor();
      await expect(widgetConversation(page)).resolves.toBe(first);

      // Sign-out on a shared device: nothing of theirs stays (not the draft, the tray, the email field, the list).
      await textbox(page).fill('my size');
      await page.evaluate(() => window.ConciergeWidget.shutdown());
      await expect(widgetConversation(page)).resolves.toBeNull();
      await expect(page.evaluate(() => Object.keys(localStorage).filter((k: string) => k.startsWith('concierge:')))).resolves.toEqual([]);
      await expect(widget(page).locator('.row.user').count()).resolves.toBe(0);
      await expect(widget(page).locator('.files li').count()).resolves.toBe(0);
      await expect(widget(page).locator('.convs li').count()).resolves.toBe(0);
      await openPanel(page);
      await expect(textbox(page).inputValue()).resolves.toBe('');
      await expect(widget(page).locator('#cw-email').inputValue()).resolves.toBe('');
      const fresh = await widgetConversation(page);
      expect(fresh).not.toBe(first);
      await expect(widget(page).locator('.row.user').count()).resolves.toBe(0);
      await expect(widget(page).getByRole('button', { name: 'Your conversations' }).isVisible()).resolves.toBe(false);
      // boot() signs the next visitor in: their own conversations come back.
      await page.evaluate((id: { user_id: string; user_hash: string }) => window.ConciergeWidget.boot(id), identity);
      await until(async () => ![null, fresh].includes(await widgetConversation(page)), 'the visitor\'s conversation');
      await openPanel(page);
      await finals(page).filter({ hasText: 'You said: second question' }).waitFor();
      await expect(widget(page).getByRole('button', { name: 'Your conversations' }).isVisible()).resolves.toBe(true);
    });
  });
});

describe('files', () => {
  test('dropped on the panel: uploaded with progress, sent with the message and shown in it; a type the site cannot take is said in plain words', async () => {
    await withPage(DESKTOP, async (page) => {
      await demo(page, { open: '1' });
      await openPanel(page);
      await expect(widget(page).getByRole('button', { name: 'Attach files' }).isVisible()).resolves.toBe(true);
      const drop = (name: string, type: string, text: string) =>
        page.evaluate(
          ([n, ty, body]: string[]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([body], n, { type: ty }));
            const target = document.querySelector('[data-concierge-widget]').shadowRoot.querySelector('.log');
            for (const kind of ['dragenter', 'dragover', 'drop']) target.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true, composed: true }));
          },
          [name, type, text],
        );
      await drop('order-notes.txt', 'text/plain', 'Order 1234: boots, size 42, delivered to the wrong address.');
      const chip = widget(page).locator('.files li', { hasText: 'order-notes.txt' });
      await chip.waitFor();
      await until(async () => (await chip.locator('progress').count()) === 0, 'the upload');
      await expect(widget(page).getByRole('button', { name: 'Remove order-notes.txt' }).isVisible()).resolves.toBe(true);
      await shot(page, 'file-in-tray');
      await say(page, 'see my notes');
      const mine = widget(page).locator('.row.user', { hasText: 'see my notes' });
      await mine.getByRole('link', { name: 'order-notes.txt' }).waitFor();
      await finals(page).filter({ hasText: 'You said: see my notes' }).waitFor({ timeout: 30_000 });
      await expect(widget(page).locator('.files li').count()).resolves.toBe(0);
      const history = (await t.app.inject({ method: 'GET', url: `/api/public/widget/history?conversation_id=${await widgetConversation(page)}`, headers: { 'x-concierge-site': site.site_id, origin: base } })).json();
      const sent = history.messages.find((m: { text: string }) => m.text === 'see my notes');
      expect(sent.attachments).toEqual([expect.objectContaining({ file_name: 'order-notes.txt' })]);

      await drop('tool.exe', 'application/x-msdownload', 'MZ\u0090\u0000\u0003binary');
      const bad = widget(page).locator('.files li.bad', { hasText: 'tool.exe' });
      await bad.waitFor();
      await expect(bad.getByRole('alert').textContent()).resolves.toBe('This kind of file cannot be sent here.');
      await shot(page, 'file-refused');
      expect(await axeScan(page)).toEqual([]);
    });
  });
});

describe('the site\'s look and language', () => {
  test('a right-to-left page in Arabic: the widget speaks Arabic, reads right to left, and an Arabic answer is laid out right to left', async () => {
    await withPage(DESKTOP, async (page) => {
      await demo(page, { language: 'ar', page_lang: 'ar', open: '1' });
      await openPanel(page);
      await expect(widget(page).locator('.w').getAttribute('dir')).resolves.toBe('rtl');
      await expect(widget(page).locator('.w').getAttribute('lang')).resolves.toBe('ar');
      await expect(widget(page).getByRole('textbox', { name: 'الرسالة' }).isVisible()).resolves.toBe(true);
      await expect(launcher(page).getAttribute('aria-label')).resolves.toBe('تصغير الدردشة');
      await widget(page).getByRole('textbox', { name: 'الرسالة' }).fill('أجب بالعربية من فضلك');
      await widget(page).getByRole('textbox', { name: 'الرسالة' }).press('Enter');
      const answer = finals(page).filter({ hasText: 'متاجرنا' });
      await answer.waitFor({ timeout: 30_000 });
      await expect(answer.getAttribute('dir')).resolves.toBe('auto');
      await expect(answer.evaluate((el: any) => getComputedStyle(el).direction)).resolves.toBe('rtl');
      await shot(page, 'arabic-rtl');
      expect(await axeScan(page)).toEqual([]);
    });
  });

  test('on a dark page the launcher keeps 3:1 against the page (a ring); the site\'s colour, side, label and dark theme apply; axe clean', async () => {
    const contrastOf = (a: number[], b: number[]) => {
      const lum = (c: number[]) => {
        const v = c.map((x) => (x / 255 <= 0.03928 ? x / 255 / 12.92 : ((x / 255 + 0.055) / 1.055) ** 2.4));
        return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
      };
      const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
      return (x + 0.05) / (y + 0.05);
    };
    const rgb = (s: string) => (s.match(/\d+/g) ?? []).slice(0, 3).map(Number);
    await withPage(DESKTOP, async (page) => {
      // The default brand colour on a near-black page: 1.7:1 alone.
      await demo(page, { page_bg: '#111111' });
      const ring = await launcher(page).getAttribute('data-ring');
      expect(ring).not.toBe('transparent');
      const shadow = await launcher(page).evaluate((el: any) => getComputedStyle(el).boxShadow as string);
      expect(contrastOf(rgb(shadow), [17, 17, 17])).toBeGreaterThanOrEqual(3);
      await shot(page, 'dark-page-launcher-ring');
    });
    await t.services.sites.setAppearance(site.site_id, { brand_color: '#ffcc00', position: 'left', launcher_label: 'Need help?', theme: 'dark' });
    try {
      await withPage(DESKTOP, async (page) => {
        await demo(page, { page_bg: '#111111' });
        const box = await launcher(page).boundingBox();
        expect(box!.x).toBeLessThan(100);
        await expect(launcher(page).textContent()).resolves.toContain('Need help?');
        // Text on a yellow brand colour is dark, not white.
        await expect(launcher(page).evaluate((el: any) => getComputedStyle(el).color)).resolves.toBe('rgb(17, 17, 17)');
        await expect(launcher(page).getAttribute('data-ring')).resolves.toBe('transparent');
        await openPanel(page);
        await expect(widget(page).locator('.w').evaluate((el: any) => el.classList.contains('dark'))).resolves.toBe(true);
        await say(page, 'hello in the dark');
        await finals(page).filter({ hasText: 'You said: hello in the dark' }).waitFor({ timeout: 30_000 });
        await shot(page, 'dark-theme-left-label');
        expect(await axeScan(page)).toEqual([]);
      });
    } finally {
      await t.services.sites.setAppearance(site.site_id, { brand_color: '#243b6b', position: 'right', launcher_label: null, theme: 'auto' });
    }
  });
});

describe('citations', () => {
  test('an answer cites the document it used, under its title, with a link that downloads it', async () => {
    await withPage(DESKTOP, async (page) => {
      await demo(page, { open: '1' });
      await openPanel(page);
      await widget(page).locator('.chips button', { hasText: 'Can I return boots?' }).click();
      const answer = widget(page).locator('.row.assistant', { hasText: 'Boots can be returned within 30 days of delivery.' });
      await answer.locator('.msg:not(.live)').waitFor({ timeout: 30_000 });
      // The marker is gone from the text; the source is the document's first heading, not its file name.
      await expect(answer.locator('.msg').textContent()).resolves.toBe('Boots can be returned within 30 days of delivery.');
      const source = answer.getByRole('list', { name: 'Sources' }).getByRole('link', { name: 'Returns and refunds' });
      await source.waitFor();
      await shot(page, 'citation-link');
      const href = (await source.getAttribute('href'))!;
      // The link is the signed download the visitor's browser follows (a new tab): its bytes are the document. It is
      // made by the worker on PUBLIC_BASE_URL (the default host here), so its path is fetched from this test's server.
      const signed = new URL(href);
      const download = await fetch(base + signed.pathname + signed.search);
      expect([href, download.status]).toEqual([href, 200]);
      expect(await download.text()).toContain('Boots can be returned within 30 days');
      expect(await axeScan(page)).toEqual([]);
    });
  });
});

describe('small things that matter', () => {
  test('at phone size the sheet is a modal dialog: Tab and Shift+Tab stay inside it', async () => {
    await withPage(PHONE, async (page) => {
      await demo(page);
      await launcher(page).click();
      await page.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached' });
      await expect(panel(page).getAttribute('aria-modal')).resolves.toBe('true');
      await say(page, 'hello from a phone');
      await finals(page).filter({ hasText: 'You said: hello from a phone' }).waitFor({ timeout: 30_000 });
      await shot(page, 'phone-sheet');
      const inside = () => page.evaluate(() => {
        const root = document.querySelector('[data-concierge-widget]').shadowRoot;
        return Boolean(root.activeElement && root.querySelector('.panel').contains(root.activeElement));
      });
      for (let i = 0; i < 12; i++) {
        await page.keyboard.press('Tab');
        expect(await inside()).toBe(true);
      }
      for (let i = 0; i < 12; i++) {
        await page.keyboard.press('Shift+Tab');
        expect(await inside()).toBe(true);
      }
      expect(await axeScan(page)).toEqual([]);
    });
  });

  test('thumbs on an answer and a rating of the conversation are stored; every message shows its time', async () => {
    await withPage(DESKTOP, async (page) => {
      await demo(page, { open: '1' });
      await openPanel(page);
      await say(page, 'rate me');
      const answer = widget(page).locator('.row.assistant', { hasText: 'You said: rate me' });
      await answer.locator('.msg:not(.live)').waitFor({ timeout: 30_000 });
      await expect(widget(page).locator('.row.user .meta time').textContent()).resolves.toMatch(/\d/);
      await expect(answer.locator('.meta time').textContent()).resolves.toMatch(/\d/);
      const up = answer.getByRole('button', { name: 'Helpful', exact: true });
      await up.click();
      await until(async () => (await up.getAttribute('aria-pressed')) === 'true', 'the thumb');
      await widget(page).getByRole('button', { name: '4 of 5 stars' }).click();
      await widget(page).locator('.rate', { hasText: 'Thanks for your feedback!' }).waitFor();
      await shot(page, 'thumbs-rating-times');
      expect(await axeScan(page)).toEqual([]);
      const id = await widgetConversation(page);
      await until(
        async () => (await api('GET', '/api/v1/analytics/feedback')).json().feedback?.some((f: { conversation_id: string; rating: string | null }) => f.conversation_id === id && f.rating === 'up'),
        'the stored thumb',
      );
      const stored = (await api('GET', '/api/v1/analytics/feedback')).json().feedback.filter((f: { conversation_id: string }) => f.conversation_id === id);
      expect(stored).toEqual(expect.arrayContaining([expect.objectContaining({ rating: 'up' })]));
    });
  });
});
