import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';
import { bearer, createKey, startTestApp, type TestApp } from '../support/app';
import { buildConsoleOnce } from '../support/build';
import { handoffReply } from '../support/console';
import { signInWithLink, watchProblems } from '../support/console-page';
import { startTestWorker } from '../support/temporal';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { upload } from '../support/kb';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { closeWindow, inboundDone, publishedMsgappAgent, startInboundDispatcher } from '../support/msgapp';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { axeScan, CHROMIUM, DESKTOP, finals, launcher, panel, textbox, widget } from '../support/widget-page';

/**
 * The console's inbox in headless Chromium (issue 31), with a widget visitor in a second browser context on the demo
 * page: the visitor asks for a person, the hand-off appears live in an agent's inbox, the agent takes over and
 * replies (the visitor sees the person's name), hands back, and the agent (the fake model) answers the next question.
 */
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let base: string;
let browser: Browser;
let workspaceId: string;
let siteId: string;
let sandbox: MsgappSandbox;
let relay: OutboxDispatcher;
const NUMBER = { id: '4440004', display: '+15550400004' };
const APP_SECRET = 'app-secret';

const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'console');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
const AGENT = { email: 'alex@example.com', password: 'correct horse battery staple' };

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await buildConsoleOnce();
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply: handoffReply, chunkChars: 50 });
  sandbox = await startMsgappSandbox({ appSecret: APP_SECRET, numbers: [{ phoneNumberId: NUMBER.id, displayPhoneNumber: NUMBER.display, accessToken: 'token-1' }] });
  const msgapp = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' }, msgapp });
  relay = await startInboundDispatcher(tw);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
    config: { INBOX_HEARTBEAT_MS: 500 },
    serviceOptions: { msgapp },
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: 'verify-me' },
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  sandbox.setWebhookUrl(`${base}/webhooks/msgapp`);
  workspaceId = await createWorkspace(db.orm, 'Acme shop');
  const auth = bearer((await createKey(t.services, workspaceId, ['workflows:write', 'workflows:publish', 'kb:write'])).key);
  // A knowledge-base file a person may attach (made active here: indexing is not what this file checks).
  const file = (await upload(t.app, auth, { filename: 'returns-policy.md', content: 'Returns are free within 30 days.' })).json() as { id: string };
  await db.orm.em.fork().execute(`update kb_files set status = 'active' where id = ?`, [file.id]);
  const made = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Shop helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [base], response_delivery: 'complete' } }, actions: [{ type: 'handoff', message: 'A colleague will take it from here.' }] },
  });
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${made.json().id}/publish`, headers: auth })).statusCode).toBe(200);
  siteId = (await t.services.sites.create(workspaceId, made.json().id, [base])).site_id;
  // The same shop on a messaging number, with one approved template.
  await publishedMsgappAgent(t, auth, workspaceId, NUMBER);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await relay?.stop();
  await tw?.close();
  await llm?.close();
  await sandbox?.close();
  await db?.drop();
});

describe('the inbox', () => {
  let agentContext: BrowserContext;
  let visitorContext: BrowserContext;
  let inbox: Page;
  let visitor: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    agentContext = await browser.newContext({ viewport: DESKTOP });
    visitorContext = await browser.newContext({ viewport: DESKTOP });
    inbox = await agentContext.newPage();
    visitor = await visitorContext.newPage();
    watchProblems(inbox, problems);
    await signInWithLink(inbox, base, t.services, workspaceId, { ...AGENT, role: 'agent' });
  });
  afterAll(async () => {
    await agentContext?.close();
    await visitorContext?.close();
  });
  afterEach(() => {
    expect(problems).toEqual([]);
  });

  test('a visitor asks for a person: the hand-off appears live; the agent takes over and replies as themself; handed back, the agent answers the next question', async () => {
    await inbox.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Inbox' }).click();
    await inbox.getByRole('heading', { level: 1, name: 'Inbox' }).waitFor();
    await inbox.getByRole('status').filter({ hasText: 'Live' }).waitFor();
    expect(await axeScan(inbox)).toEqual([]);

    // The visitor, on the site's page.
    await visitor.goto(`${base}/demo?${new URLSearchParams({ site_id: siteId })}`);
    await visitor.locator('[data-concierge-widget][data-state]').waitFor({ state: 'attached', timeout: 20_000 });
    if (!(await panel(visitor).isVisible())) await launcher(visitor).click();
    await visitor.locator('[data-concierge-widget][data-state=ready]').waitFor({ state: 'attached', timeout: 20_000 });
    await textbox(visitor).fill('I want a person please');
    await textbox(visitor).press('Enter');
    await finals(visitor).filter({ hasText: 'A colleague will take it from here.' }).waitFor({ timeout: 30_000 });

    // Live in the inbox, without a reload: waiting for a person, unread.
    const item = inbox.getByRole('link', { name: /I want a person please/ });
    await item.waitFor({ timeout: 15_000 });
    await item.getByText('Waiting for a person', { exact: false }).waitFor();
    await item.getByRole('img', { name: 'Unread' }).waitFor();
    await item.click();
    await inbox.getByRole('heading', { level: 2, name: 'I want a person please' }).waitFor();
    await inbox.getByRole('list', { name: 'Transcript' }).getByText('A colleague will take it from here.').waitFor();
    expect(await axeScan(inbox)).toEqual([]);

    // Take over: the visitor sees that a person joined.
    await inbox.getByRole('button', { name: 'Take over' }).click();
    await inbox.getByText('held by alex@example.com').waitFor();
    await widget(visitor).locator('.row.assistant', { hasText: 'alex joined the conversation.' }).waitFor({ timeout: 15_000 });

    // Reply: in the widget, from the person.
    await inbox.getByRole('textbox', { name: 'Your reply' }).fill('Hi, this is Alex. Your parcel left today.');
    await inbox.getByLabel('Attach a knowledge-base file').selectOption({ label: 'returns-policy.md' });
    await inbox.getByRole('list', { name: 'Attached files' }).getByText('returns-policy.md').waitFor();
    // A file from the person's computer, beside it (the button opens the chooser; the test sets its file).
    await inbox.getByRole('button', { name: 'Attach a file from your computer' }).waitFor();
    await inbox.getByLabel('File from your computer').setInputFiles({ name: 'tracking.txt', mimeType: 'text/plain', buffer: Buffer.from('Tracking number 123\n') });
    await inbox.getByRole('list', { name: 'Attached files' }).getByText('tracking.txt').waitFor();
    await inbox.getByRole('button', { name: 'Send reply' }).click();
    const human = widget(visitor).locator('.row.assistant', { hasText: 'Your parcel left today.' });
    await human.waitFor({ timeout: 15_000 });
    await expect(human.locator('.who').textContent()).resolves.toBe('alex');
    await human.getByText('returns-policy.md').waitFor();
    await human.getByText('tracking.txt').waitFor();
    // A note stays the team's.
    await inbox.getByRole('textbox', { name: 'Note' }).fill('Parcel was late twice');
    await inbox.getByRole('button', { name: 'Add note' }).click();
    await inbox.getByRole('list', { name: 'Notes' }).getByText('Parcel was late twice').waitFor();
    await shot(inbox, 'desktop-inbox-conversation');
    expect(await axeScan(inbox)).toEqual([]);
    await expect(widget(visitor).getByText('Parcel was late twice').count()).resolves.toBe(0);

    // Hand back: the agent answers the next question.
    await inbox.getByRole('button', { name: 'Hand back to the agent' }).click();
    await inbox.getByText('the agent answers').waitFor();
    await textbox(visitor).fill('when do you open');
    await textbox(visitor).press('Enter');
    await finals(visitor).filter({ hasText: 'Echo: when do you open' }).waitFor({ timeout: 30_000 });
    // The inbox followed it live.
    await inbox.getByRole('list', { name: 'Transcript' }).getByText('Echo: when do you open').waitFor({ timeout: 15_000 });
  }, 120_000);

  test('msgapp: the customer\'s message appears live; a reply goes inside the 24-hour window; after it, the template picker sends an approved template', async () => {
    const customer = '+15557003003';
    const sent = await sandbox.injectInbound({ from: customer, to: NUMBER.id, text: 'I want a person on messaging', profileName: 'Robin' });
    expect(sent.webhookStatus).toBe(200);
    await inboundDone(tw, sent.providerMessageId);
    const item = inbox.getByRole('link', { name: /I want a person on messaging/ });
    await item.waitFor({ timeout: 15_000 });
    await item.click();
    await inbox.getByRole('heading', { level: 2, name: 'I want a person on messaging' }).waitFor();
    const toCustomer = () => sandbox.sent.filter((m) => m.body.to === customer).map((m) => m.body);
    await inbox.getByRole('textbox', { name: 'Your reply' }).fill('Hi Robin, Alex here.');
    await inbox.getByRole('button', { name: 'Send reply' }).click();
    await inbox.getByRole('list', { name: 'Transcript' }).getByText('Hi Robin, Alex here.').waitFor({ timeout: 15_000 });
    expect(toCustomer()).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'text', text: expect.objectContaining({ body: 'Hi Robin, Alex here.' }) })]));

    // A day later the window has closed: the inbox (told live of the change) offers the templates only.
    const conversationId = new URL(inbox.url()).pathname.split('/').pop()!;
    await closeWindow(db.orm, conversationId);
    await inbox.getByRole('heading', { level: 3, name: 'Reply with a template' }).waitFor({ timeout: 15_000 });
    expect(await axeScan(inbox)).toEqual([]);
    await inbox.getByLabel('Template').selectOption({ label: 'order_update (en): Your order {{1}} is on its way.' });
    await inbox.getByRole('textbox', { name: 'Variables' }).fill('A-1');
    await inbox.getByRole('button', { name: 'Send template' }).click();
    await inbox.getByText('Template sent').waitFor();
    expect(toCustomer()).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'template', template: expect.objectContaining({ name: 'order_update' }) })]));

    // Filters: by agent, then a word from the web chat's transcript.
    const list = inbox.getByRole('region', { name: 'Open' });
    await inbox.getByLabel('Agent', { exact: true }).selectOption({ label: 'Messaging helper' });
    await inbox.getByRole('button', { name: 'Apply' }).click();
    await inbox.getByRole('link', { name: /I want a person please/ }).waitFor({ state: 'detached' });
    await inbox.getByRole('link', { name: /I want a person on messaging/ }).waitFor();
    await inbox.getByLabel('Agent', { exact: true }).selectOption({ label: 'Any' });
    await inbox.getByRole('searchbox', { name: 'Search transcripts' }).fill('parcel');
    await inbox.getByRole('button', { name: 'Apply' }).click();
    await inbox.getByRole('link', { name: /I want a person on messaging/ }).waitFor({ state: 'detached' });
    await list.getByRole('link', { name: /I want a person please/ }).waitFor();
  }, 60_000);
});
