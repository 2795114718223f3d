import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { SendPlan } from '../../domain/messaging/plan';
import { newId } from '../../lib/ids';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { buildConsoleOnce } from '../support/build';
import { signInWithLink, watchProblems } from '../support/console-page';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import { axeScan, CHROMIUM, DESKTOP } from '../support/widget-page';

/**
 * The console's debugger, messages and analytics pages (issue 31 parts 6–8) in headless Chromium, served by the real
 * app from its build: a real agent turn (the fake model: a tool call, then the answer from a knowledge-base passage)
 * shown from its workflow history; messages sent through the API with their status; analytics charts for a range the
 * URL gives. axe-clean once per page at desktop size.
 */

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: string;
let ws: string;
let agentId: string;
let conversationId: string;
const problems: string[] = [];
const ORIGIN = 'https://shop.example';
const OWNER = { email: 'insights-owner@example.com', password: 'correct horse battery staple' };
const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'console');
const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

function reply(body: { messages: Array<{ role: string; content: string | null }> }) {
  if (body.messages.at(-1)!.role === 'tool') return { text: 'Unworn boots can go back within 45 days [1].' };
  return { text: '', tool_calls: [{ name: 'suggest_replies', arguments: { suggestions: ['Start a return'] } }] };
}

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await buildConsoleOnce();
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' } });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  ws = await createWorkspace(db.orm, 'Boots');
  const kbAuth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
  const dispatcher = await startIndexDispatcher(tw);
  try {
    const file = await upload(t.app, kbAuth, { filename: 'returns.md', content: '# Returns\n\nUnworn boots can be sent back within 45 days of delivery for a full refund.\n' });
    expect(await indexed(tw, file.json().id)).toBe('active');
  } finally {
    await dispatcher.stop();
  }
  agentId = await publishedWebAgent(t.app, bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key), ORIGIN, { actions: [{ type: 'reply_elements', kinds: ['suggested_actions'] }] });
  const site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  const widget = (url: string, payload: object) => t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
  conversationId = (await widget('init', {})).json().conversation_id;
  expect((await widget('send', { conversation_id: conversationId, text: 'how long do I have to return my boots?' })).json().text).toBe('Unworn boots can go back within 45 days.');

  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  context = await browser.newContext({ viewport: DESKTOP, acceptDownloads: true });
  page = await context.newPage();
  page.setDefaultTimeout(10_000);
  watchProblems(page, problems);
  await signInWithLink(page, base, t.services, ws, { ...OWNER, role: 'owner' });
}, 300_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
});

afterEach(() => {
  expect(problems).toEqual([]);
});

test("the debugger shows a turn's retrieved passages, its tool call and the output before masking, and exports the history", async () => {
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Debugger' }).click();
  await page.getByRole('heading', { level: 1, name: 'Conversation debugger' }).waitFor();
  await page.getByRole('link', { name: conversationId }).click();
  const turn = page.getByRole('region', { name: 'Reply 1: answered' });
  await turn.waitFor();
  const passages = turn.getByRole('region', { name: 'Passages retrieved for reply 1' });
  await passages.getByRole('cell', { name: 'Returns (returns.md)' }).waitFor();
  expect(await passages.getByRole('cell', { name: /^0\.\d{3}$/ }).count()).toBe(1);
  const tools = turn.getByRole('region', { name: 'Tool calls of reply 1' });
  await tools.getByRole('rowheader', { name: 'suggest_replies' }).waitFor();
  await tools.getByRole('cell', { name: /Start a return/ }).first().waitFor();
  // The output as sent, then before masking (this agent masks nothing, so the two agree).
  await turn.getByText('Before masking:').waitFor();
  expect(await turn.getByText('Unworn boots can go back within 45 days.', { exact: true }).count()).toBe(2);
  await page.getByText('your view is recorded in the audit log').waitFor();
  await turn.getByRole('region', { name: 'Latency of reply 1' }).getByRole('rowheader', { name: 'queued for a worker' }).waitFor();
  expect(await page.getByRole('link', { name: /open in the Temporal UI/ }).getAttribute('href')).toContain(encodeURIComponent(`conversation:${conversationId}`));
  await shot('desktop-debugger');
  expect(await axeScan(page)).toEqual([]);

  const download = page.waitForEvent('download');
  await page.getByRole('link', { name: 'Export history' }).click();
  const file = await download;
  expect(file.suggestedFilename()).toBe(`conversation_${conversationId}.json`);
  const exported = JSON.parse(fs.readFileSync((await file.path())!, 'utf8'));
  expect(exported.events[0].workflowExecutionStartedEventAttributes.workflowType.name).toBe('conversationWorkflow');
});

test("the messages page shows sent messages with their status, filters by status, and a message's timeline with its error", async () => {
  const plan = (to: string): SendPlan => ({
    messageId: newId('msg'),
    workspaceId: ws,
    agentId,
    fromNumber: '+15550001111',
    phoneNumberId: 'pn_1',
    credentialId: 'cred_1',
    to,
    customerId: null,
    content: { type: 'text', text: { body: 'Your order shipped.' } } as unknown as SendPlan['content'],
    kind: 'text',
    text: 'Your order shipped.',
    templateName: null,
  });
  const sent = plan('+447700900123');
  await t.services.messages.record(sent);
  await t.services.messages.markSent(sent, 'wamid.sent1');
  const failed = plan('+447700900456');
  await t.services.messages.record(failed);
  await t.services.messages.markFailed(failed, 'the number is not on the messaging app (131026)');

  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Messages' }).click();
  await page.getByRole('heading', { level: 1, name: 'Messages' }).waitFor();
  const table = page.getByRole('region', { name: 'Messages' });
  await table.getByRole('row', { name: /\+447700900123.*sent/ }).waitFor();
  await table.getByRole('row', { name: /\+447700900456.*failed.*131026/ }).waitFor();
  expect(await axeScan(page)).toEqual([]);
  await page.getByLabel('Status').selectOption('failed');
  await table.getByRole('row', { name: /\+447700900123/ }).waitFor({ state: 'detached' });
  await shot('desktop-messages');
  await table.getByRole('link', { name: '+447700900456' }).click();
  await page.getByRole('heading', { level: 1, name: 'Message' }).waitFor();
  const timeline = page.getByRole('region', { name: 'Status timeline' });
  await timeline.getByText('failed', { exact: true }).waitFor();
  await timeline.getByText('Error: the number is not on the messaging app (131026)').waitFor();
});

test('the analytics page renders its charts for the range the URL gives, each with a table', async () => {
  const day = (offset: number) => new Date(Date.parse(new Date().toISOString().slice(0, 10)) + offset * 86_400_000).toISOString().slice(0, 10);
  await page.goto(`${base}/console/analytics?from=${day(-6)}&to=${day(1)}&interval=day`);
  await page.getByRole('heading', { level: 1, name: 'Analytics' }).waitFor();
  expect(await page.getByLabel('From').inputValue()).toBe(day(-6));
  expect(await page.getByLabel('Until (not included)').inputValue()).toBe(day(1));
  // What the API says of the same range (the debugger's web conversation, the messages' msgapp ones), as the charts say it.
  const key = bearer((await createKey(t.services, ws, ['analytics:read'])).key);
  const summary = (await t.app.inject({ method: 'GET', url: `/api/v1/analytics/summary?from=${day(-6)}&to=${day(1)}`, headers: key })).json();
  expect(summary.conversations).toBeGreaterThanOrEqual(1);
  const n = summary.conversations;
  const all = `${n} ${n === 1 ? 'conversation' : 'conversations'} in all`;
  await page.getByRole('img', { name: `Conversations per day: 7 bars; ${all}; the largest, ${day(0)}, with ${n}.` }).waitFor();
  await page.getByRole('img', { name: new RegExp(`^Conversations by channel: 3 bars; ${all}`) }).waitFor();
  await page.getByRole('img', { name: new RegExp(`^Resolution: 3 bars; ${all}`) }).waitFor();
  await page.getByRole('img', { name: new RegExp(`^Busiest hours \\(UTC\\): 24 bars; ${all}`) }).waitFor();
  await page.getByRole('img', { name: 'Visitors’ ratings: no ratings in this range.' }).waitFor();
  await page.getByRole('region', { name: 'Summary' }).getByText(`${Math.round(summary.resolution_rate * 1000) / 10} %`).first().waitFor();
  const chart = page.getByRole('figure', { name: 'Conversations per day' });
  await chart.getByRole('button', { name: 'Show as a table' }).click();
  await chart.getByRole('row', { name: `${day(0)} ${n}` }).waitFor();
  await shot('desktop-analytics');
  expect(await axeScan(page)).toEqual([]);
  // Another range from the form lands in the address, so the view can be shared.
  await page.getByLabel('From').fill(day(-2));
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.waitForURL(new RegExp(`/console/analytics\\?from=${day(-2)}&to=${day(1)}&interval=day$`));
  await page.getByRole('img', { name: new RegExp(`^Conversations per day: 3 bars; ${all}`) }).waitFor();
});
