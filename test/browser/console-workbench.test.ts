import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { ConsoleRole } from '../../db/entities';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';
import { bearer, createKey, startTestApp, type TestApp } from '../support/app';
import { buildConsoleOnce } from '../support/build';
import { signInWithLink, watchProblems } from '../support/console-page';
import { startIndexDispatcher } from '../support/kb';
import { startTestWorker, type TestWorker } from '../support/temporal';
import { axeScan, CHROMIUM, DESKTOP } from '../support/widget-page';

/**
 * The agent builder's workbench in a real headless Chromium, served by the real app from its build: the knowledge base
 * (an upload with its progress, indexed to active by the real worker; the search playground's passage and score), then an
 * agent created, its instructions edited (and an API validation error shown by its field), published, and tried: a real
 * turn on the fake model, answered from the uploaded passage, in a test conversation that no conversation list, analytics
 * or billing shows. A viewer sees the agent and cannot change it.
 */

let db: TestDatabase;
let t: TestApp;
let tw: TestWorker;
let llm: FakeLlm;
let dispatcher: OutboxDispatcher;
let base: string;
let browser: Browser;
let workspaceId: string;
let auth: Record<string, string>;

const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'console');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
const PASSWORD = 'correct horse battery staple';

// Page functions run in the browser; the project type-checks without the DOM lib.
declare const window: any;
const PASSAGE = 'Unworn boots can be sent back within 45 days of delivery for a full refund.';
/** A Markdown policy of about 24 KB: long enough for its upload's progress to be seen under a throttled connection. */
const POLICY = [
  '# Returns policy',
  '',
  PASSAGE,
  '',
  ...Array.from({ length: 120 }, (_, i) => `## Note ${i + 1}\n\nOur shop in Leeds packs every order with care; parcel ${i + 1} travels by courier and is tracked until it reaches you.\n`),
].join('\n');

beforeAll(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await buildConsoleOnce();
  db = await createTestDatabase();
  llm = await startFakeLlm({
    reply: (body) => {
      const system = String(body.messages.find((m: { role: string }) => m.role === 'system')?.content ?? '');
      const asked = String([...body.messages].reverse().find((m: { role: string }) => m.role === 'user')?.content ?? '');
      if (!system.includes('45 days') || !/return/i.test(asked)) return { text: `Echo: ${asked}` };
      // The answer cites the passage that holds the sentence by the number the prompt gave it.
      const at = system.indexOf('45 days');
      const n = [...system.matchAll(/^\[(\d+)\] \(file: /gm)].filter((m) => (m.index ?? 0) < at).at(-1)?.[1];
      return { text: `You can send unworn boots back within 45 days [${n}].` };
    },
  });
  const llmSettings = { baseUrl: llm.url, model: 'fake-model' };
  tw = await startTestWorker(db, { llm: llmSettings });
  dispatcher = await startIndexDispatcher(tw);
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { llm: llmSettings }, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  workspaceId = await createWorkspace(db.orm, 'Boot shop');
  auth = bearer((await createKey(t.services, workspaceId, ['kb:read', 'workflows:read', 'conversations:read', 'analytics:read'])).key);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await dispatcher?.stop();
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
});

/** A person of this role signed in through their one-time link, on a page of their own. */
async function signedIn(role: ConsoleRole, problems: string[]): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  watchProblems(page, problems);
  await signInWithLink(page, base, t.services, workspaceId, { email: `${role}-workbench@example.com`, password: PASSWORD, role });
  return { context, page };
}

const nav = (page: Page, name: string) => page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

describe('the agent builder workbench', () => {
  const problems: string[] = [];
  let owner: { context: BrowserContext; page: Page };
  let agentId: string;

  beforeAll(async () => {
    owner = await signedIn('owner', problems);
  });
  afterAll(async () => {
    await owner?.context.close();
  });
  afterEach(() => {
    expect(problems).toEqual([]);
  });

  test('the knowledge base: an upload shows its progress and becomes active; the search playground shows the passage with its score', async () => {
    const { page } = owner;
    await nav(page, 'Knowledge base').click();
    await page.getByRole('heading', { level: 1, name: 'Knowledge base' }).waitFor();
    await page.getByText('No files in this folder.').waitFor();
    expect(await axeScan(page)).toEqual([]);

    // A folder, then the file into it through the file chooser (the keyboard's way; the drop zone takes the same files).
    await page.getByRole('button', { name: 'New folder' }).click();
    await page.getByRole('dialog', { name: 'New folder' }).getByLabel('Folder name').fill('Policies');
    await page.getByRole('dialog', { name: 'New folder' }).getByRole('button', { name: 'Create folder' }).click();
    await page.getByRole('status').filter({ hasText: 'Folder /Policies created.' }).waitFor();
    expect(await page.getByLabel('Folder', { exact: true }).inputValue()).toMatch(/^fld_/);

    // A slow uplink, so the upload's progress is there to be seen.
    const cdp = await owner.context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 8 * 1024 });
    const chooser = page.waitForEvent('filechooser');
    await page.getByRole('button', { name: 'Choose files to upload' }).click();
    await (await chooser).setFiles({ name: 'returns.md', mimeType: 'text/markdown', buffer: Buffer.from(POLICY) });
    const progress = page.getByRole('progressbar', { name: 'Upload of returns.md' });
    await progress.waitFor();
    // The browser hands the bytes on at once (XMLHttpRequest's progress counts what left the page), then the slow link
    // carries them: the bar stands at 100% until the API answers, and leaves for the file's row.
    await page.getByText('Uploading returns.md: 100%').waitFor();
    expect(await progress.evaluate((p: any) => [p.value, p.max])).toEqual([100, 100]);
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await progress.waitFor({ state: 'detached', timeout: 30_000 });

    // Indexed by the worker: the list is asked again until the file is active.
    const row = page.getByRole('row', { name: /returns\.md/ });
    await row.getByText('Active', { exact: true }).waitFor({ timeout: 60_000 });
    await page.getByRole('status').filter({ hasText: 'returns.md is indexed and searchable.' }).waitFor();
    await shot(page, 'desktop-knowledge-base');

    // The playground: the passage and its score, as the API ranks it.
    await page.getByRole('textbox', { name: 'Query' }).fill('how long can I return boots');
    await page.getByLabel('In folder').selectOption({ label: '/Policies' });
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    // Passages overlap: the first match holding the sentence, as the API ranks them.
    const match = page.getByRole('list', { name: 'Matches' }).getByRole('listitem').filter({ hasText: PASSAGE }).first();
    await match.waitFor();
    const api = (await t.app.inject({ method: 'POST', url: '/api/v1/kb/search', headers: auth, payload: { query: 'how long can I return boots', top_k: 8 } })).json();
    const scored = api.matches.find((m: { text: string }) => m.text.includes(PASSAGE));
    await match.getByText(`Score ${scored.score.toFixed(3)}`).waitFor();
  });

  test('files: dropped onto the drop zone, a new version by the same name, the current version deleted, moved to the top level, deleted', async () => {
    const { page } = owner;
    const shipping = (text: string) => page.evaluateHandle((body: string) => {
      const dt = new window.DataTransfer();
      dt.items.add(new window.File([body], 'shipping.md', { type: 'text/markdown' }));
      return dt;
    }, text);
    await page.getByRole('group', { name: 'Upload files' }).dispatchEvent('drop', { dataTransfer: await shipping('# Shipping\n\nBoots ship within three working days.') });
    const row = page.getByRole('row', { name: /shipping\.md/ });
    await row.getByText('Active', { exact: true }).waitFor({ timeout: 60_000 });

    // The same name into the same folder: the document's version 2, current.
    const chooser = page.waitForEvent('filechooser');
    await row.getByRole('button', { name: 'Upload a new version of shipping.md' }).click();
    await (await chooser).setFiles({ name: 'shipping.md', mimeType: 'text/markdown', buffer: Buffer.from('# Shipping\n\nBoots ship within two working days.') });
    await page.getByRole('status').filter({ hasText: 'shipping.md uploaded as version 2: indexing.' }).waitFor();
    await row.getByRole('cell', { name: '2', exact: true }).waitFor();
    await row.getByText('Active', { exact: true }).waitFor({ timeout: 60_000 });
    // Deleting the current version makes the previous one current again.
    await row.getByRole('button', { name: 'Delete shipping.md' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete shipping.md?' });
    await confirm.getByText('This deletes version 2; version 1 becomes current again.').waitFor();
    await confirm.getByRole('button', { name: 'Delete file' }).click();
    // Version 1 again (its passage count is 1 too: the version's cell is the row's first '1').
    await row.getByRole('cell', { name: '2', exact: true }).waitFor({ state: 'detached' });
    await row.getByRole('cell', { name: '1', exact: true }).first().waitFor();

    // Moved to the top level: gone from /Policies, listed there.
    await row.getByRole('button', { name: 'Move shipping.md' }).click();
    await page.getByRole('dialog', { name: 'Move shipping.md' }).getByLabel('Move to').selectOption({ label: 'Top level' });
    await page.getByRole('dialog', { name: 'Move shipping.md' }).getByRole('button', { name: 'Move file' }).click();
    await page.getByRole('status').filter({ hasText: 'shipping.md moved to the top level.' }).waitFor();
    await row.waitFor({ state: 'detached' });
    await page.getByLabel('Folder', { exact: true }).selectOption({ label: 'Top level' });
    await row.getByRole('button', { name: 'Delete shipping.md' }).click();
    await page.getByRole('dialog', { name: 'Delete shipping.md?' }).getByRole('button', { name: 'Delete file' }).click();
    await page.getByText('No files in this folder.').waitFor();
  });

  test('an agent: created, its instructions edited (a validation error shown by its field), published, and tried in a test conversation no list, analytics or billing shows', async () => {
    const { page } = owner;
    await nav(page, 'Agents').click();
    await page.getByRole('heading', { level: 1, name: 'Agents' }).waitFor();
    await page.getByText('No agents yet.').waitFor();
    expect(await axeScan(page)).toEqual([]);
    await page.getByRole('button', { name: 'New agent' }).click();
    await page.getByRole('dialog', { name: 'New agent' }).getByLabel('Agent name').fill('Boots helper');
    await page.getByRole('dialog', { name: 'New agent' }).getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { level: 1, name: 'Boots helper' }).waitFor();
    agentId = /\/agents\/(agt_[0-9a-f]{24})$/.exec(page.url())![1];

    // The API's refusal, next to the field it names.
    await page.getByRole('textbox', { name: 'Temperature' }).fill('5');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('group', { name: 'Model' }).getByRole('alert').filter({ hasText: /temperature/ }).waitFor();
    await page.getByRole('textbox', { name: 'Temperature' }).fill('0.2');

    await page.getByRole('textbox', { name: 'Instructions' }).fill('You answer questions about boots, briefly.');
    await page.getByRole('checkbox', { name: 'Answer on web chat' }).check();
    await page.getByRole('textbox', { name: 'Allowed origins' }).fill('https://shop.example');
    await page.getByRole('group', { name: 'Files' }).getByRole('checkbox', { name: '/Policies/returns.md' }).check();
    await page.getByRole('button', { name: 'Add template' }).click();
    await page.getByRole('textbox', { name: 'Template 1 name' }).fill('order_update');
    await page.getByRole('textbox', { name: 'Template 1 text' }).fill('Your order {{1}} ships today.');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Agent saved.' }).waitFor();
    const saved = (await t.app.inject({ method: 'GET', url: `/api/v1/agents/${agentId}`, headers: auth })).json();
    expect(saved.spec.knowledge_base.file_ids).toEqual([expect.stringMatching(/^file_/)]);
    expect(saved.spec).toMatchObject({ instructions: 'You answer questions about boots, briefly.', model: { temperature: 0.2 }, triggers: { web_chat: { allowed_origins: ['https://shop.example'] } }, templates: [{ name: 'order_update', language: 'en', body: 'Your order {{1}} ships today.', status: 'approved' }] });

    await page.getByRole('button', { name: 'Publish' }).click();
    await page.getByRole('status').filter({ hasText: 'Boots helper is published.' }).waitFor();
    await page.getByRole('definition').filter({ hasText: 'Published' }).first().waitFor();

    // Try it: a real turn, answered from the uploaded passage.
    await page.getByRole('button', { name: 'Try it' }).click();
    const panel = page.getByRole('complementary', { name: 'Try it' });
    await panel.getByRole('textbox', { name: 'Message to the agent' }).fill('How long do I have to return my boots?');
    await panel.getByRole('button', { name: 'Send' }).click();
    await panel.getByText('You can send unworn boots back within 45 days').waitFor({ timeout: 30_000 });
    await panel.getByText('Sources: Returns policy (returns.md)').waitFor();
    expect(await panel.getByRole('link', { name: 'Open this test conversation in the debugger' }).getAttribute('href')).toMatch(/^\/console\/conversations\/conv_[0-9a-f]{24}\/debug$/);
    await shot(page, 'desktop-agent-try');
    expect(await axeScan(page)).toEqual([]);

    // The test conversation is in no list, no analytics, no billing.
    const [test] = (await db.orm.em.fork().execute(`select id from conversations where workspace_id = ? and is_test`, [workspaceId])) as Array<{ id: string }>;
    expect(test.id).toMatch(/^conv_/);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/conversations', headers: auth })).json().conversations).toEqual([]);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/analytics/summary', headers: auth })).json()).toMatchObject({ conversations: 0, messages_in: 0, messages_out: 0 });
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/billing/usage', headers: auth })).json().usage).toEqual([]);
  });

  test('a viewer sees the agent and the knowledge base but cannot change them: no controls, and the API answers 403', async () => {
    const viewer = await signedIn('viewer', problems);
    try {
      const { page } = viewer;
      await page.goto(`${base}/console/agents/${agentId}`);
      await page.getByRole('heading', { level: 1, name: 'Boots helper' }).waitFor();
      await page.getByText('Your role can read this agent, not change it.').waitFor();
      expect(await page.getByRole('textbox', { name: 'Instructions' }).isDisabled()).toBe(true);
      for (const name of ['Save changes', 'Publish', 'Try it']) expect(await page.getByRole('button', { name }).count()).toBe(0);
      await nav(page, 'Knowledge base').click();
      await page.getByRole('heading', { level: 1, name: 'Knowledge base' }).waitFor();
      await page.getByRole('heading', { level: 2, name: 'Search playground' }).waitFor();
      expect(await page.getByRole('button', { name: 'Choose files to upload' }).count()).toBe(0);
      // The API refuses the same change the page does not offer.
      const refused = await page.evaluate(async (id: string) => {
        const session = (await (await fetch('/api/console/session')).json()) as { csrf_token: string };
        const res = await fetch(`/api/v1/agents/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrf_token }, body: JSON.stringify({ instructions: 'Changed.' }) });
        return [res.status, ((await res.json()) as { error: string }).error];
      }, agentId);
      expect(refused).toEqual([403, 'insufficient_scope']);
    } finally {
      await viewer.context.close();
    }
  });
});
