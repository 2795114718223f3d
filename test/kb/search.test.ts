import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createEmbedder } from '../../providers/embeddings/embedder';
import { lazyEmbedder } from '../../app/compose';
import { newId } from '../../lib/ids';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, testServices, type TestApp } from '../support/app';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';

/** A support-style corpus; each query shares no keyword (after stemming) with its answer. */
const CORPUS: Array<[file: string, text: string, query: string]> = [
  ['returns.txt', 'Items may be sent back within thirty days of delivery for a full refund to the original card.', 'I regret buying something, can I get reimbursed?'],
  ['shipping-times.txt', 'Standard parcels arrive in three to five business days; express parcels arrive the next working day.', 'How long until my package gets here?'],
  ['password-reset.txt', "To set a new password, click 'Forgot password' on the sign-in page and follow the emailed link.", "I can't remember my login credentials"],
  ['opening-hours.txt', 'Our stores are open Monday to Saturday from 9am to 6pm and closed on Sundays.', 'When can I visit your shop?'],
  ['international.txt', 'We deliver to 40 countries across Europe, Asia and the Americas; customs duties are paid by the recipient.', 'Do you send orders abroad?'],
  ['payment-methods.txt', 'We accept Visa, Mastercard, American Express, PayPal and Apple Pay.', 'Which credit cards can I use at checkout?'],
  ['warranty.txt', 'All electronics include a two-year manufacturer guarantee covering defects.', 'My laptop stopped working after twelve months, will you repair it for free?'],
  ['cancel-subscription.txt', 'You can end your membership at any time from Account Settings; billing stops at the end of the period.', 'How do I quit my monthly plan?'],
  ['gift-cards.txt', 'Gift vouchers never expire and can be redeemed online or in store.', 'Is there an expiry on presents bought as prepaid credit?'],
  ['damaged-item.txt', 'If a product arrives broken, send us a photo within 48 hours and we will replace it.', 'My order came smashed, what should I do?'],
  ['student-discount.txt', 'Learners enrolled at a university get 15% off with a valid student ID.', 'Do you have cheaper prices for college pupils?'],
  ['data-privacy.txt', 'We never sell personal information to third parties; you may request deletion of your data.', 'Will you share my details with advertisers?'],
  ['loyalty-points.txt', 'Earn one point for every euro spent; 100 points convert into a 5 euro reward.', 'How does your customer loyalty programme work?'],
  ['order-tracking.txt', "Once dispatched, a tracking number is emailed so you can follow the parcel's journey.", 'How can I see where my shipment currently is?'],
  ['contact-phone.txt', 'Call our helpline on 0800 123 456, Monday to Friday, 8am to 8pm.', 'What digits should I ring to speak with someone?'],
  ['size-guide.txt', 'Clothing measurements: small fits chest 86-91 cm, medium 96-101 cm, large 106-111 cm.', 'Which t-shirt dimension should I pick for my body?'],
  ['allergens.txt', 'Our snacks are produced in a facility that also handles peanuts, tree nuts and gluten.', 'Can people with food intolerances eat your treats safely?'],
  ['pet-policy.txt', 'Dogs and cats are welcome in our stores when kept on a leash or in a carrier.', 'Can I bring my puppy inside?'],
  ['bulk-orders.txt', 'Businesses buying more than 100 units receive wholesale pricing and a dedicated account manager.', 'Is there a discount when a company purchases large quantities?'],
  ['account-deletion.txt', 'To close your profile permanently, email privacy@example.com from the registered address.', 'I want to erase my account forever'],
  ['recycling.txt', 'Bring old batteries and electronics to any branch for free eco-friendly disposal.', 'Where can I drop off used gadgets responsibly?'],
  ['two-factor.txt', 'Enable two-step verification in Security settings to guard sign-ins with a code from an authenticator app.', 'How do I require an additional confirmation whenever I log in?'],
];

/** Where the full-text side must carry the result: exact codes no sentence model knows. */
const KEYWORD: Array<[file: string, text: string, query: string]> = [
  ['sku-list.txt', 'Replacement filter cartridge, part SKU-48213X, fits every kettle sold since 2019.', 'SKU-48213X'],
  ['error-codes.txt', 'Error E-7741 on the terminal means the card reader lost its network link; restart the router.', 'E-7741'],
];

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let auth: Record<string, string>;
let workspaceId: string;
const ids = new Map<string, string>();

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  tw = await startTestWorker(db);
  dispatcher = await startIndexDispatcher(tw);
  const ws = await createWorkspace(db.orm);
  workspaceId = ws;
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
  for (const [file, text] of [...CORPUS, ...KEYWORD]) {
    const res = await upload(t.app, auth, { filename: file, content: text });
    expect(res.statusCode).toBe(201);
    ids.set(file, res.json().id);
  }
  for (const [file, id] of ids) {
    const outcome = await indexed(tw, id);
    const row = (await db.orm.em.fork().execute('select status, error_message from kb_files where id = ?', [id]))[0];
    expect({ file, outcome, row }).toEqual({ file, outcome: 'active', row: { status: 'active', error_message: null } });
  }
}, 120_000);
afterAll(async () => {
  await t.close();
  await dispatcher.stop();
  await tw.close();
  await db.drop();
});

const search = (body: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/kb/search', headers: auth, payload: body });

describe('hybrid search', () => {
  test('the queries really share no keyword with their answers', async () => {
    for (const [, text, query] of CORPUS) {
      const shared = await db.orm.em.fork().execute(
        `select unnest(tsvector_to_array(to_tsvector('english', ?))) intersect select unnest(tsvector_to_array(to_tsvector('english', ?)))`,
        [query, text],
      );
      expect({ query, shared }).toEqual({ query, shared: [] });
    }
  });

  test('by meaning: the right file ranks first for at least 90% of keyword-free queries', async () => {
    const misses: string[] = [];
    for (const [file, , query] of CORPUS) {
      const res = await search({ query, top_k: 5 });
      expect(res.statusCode).toBe(200);
      const top = res.json().matches[0];
      if (top?.file_id !== ids.get(file)) misses.push(`${query} → ${top?.name}`);
    }
    const hitRate = 1 - misses.length / CORPUS.length;
    if (hitRate < 0.9) throw new Error(`right file first for ${(hitRate * 100).toFixed(0)}% of queries; misses:\n${misses.join('\n')}`);
    expect(hitRate).toBeGreaterThanOrEqual(0.9);
  });

  test('by keyword: exact codes are carried by full-text search', async () => {
    for (const [file, , query] of KEYWORD) {
      const top = (await search({ query })).json().matches[0];
      expect(top).toMatchObject({ file_id: ids.get(file), name: file });
    }
  });

  test('matches have the documented shape, best first, scores in [0, 1]; top_k is honoured', async () => {
    const res = await search({ query: 'parcel delivery time', top_k: 3 });
    const matches = res.json().matches;
    expect(matches).toHaveLength(3);
    for (const m of matches) {
      expect(m).toEqual({ id: expect.stringMatching(/^psg_/), name: expect.any(String), score: expect.any(Number), file_id: expect.stringMatching(/^file_/), folder_id: null, text: expect.any(String) });
      expect(m.score).toBeGreaterThanOrEqual(0);
      expect(m.score).toBeLessThanOrEqual(1);
    }
    expect([...matches].sort((a, b) => b.score - a.score)).toEqual(matches);
    expect((await search({ query: 'x' })).json().matches.length).toBeLessThanOrEqual(8);
  });

  test('kb_id restricts to one file; folder_id to a folder and its subfolders; both apply together', async () => {
    const only = (await search({ query: 'How long until my package gets here?', kb_id: ids.get('pet-policy.txt') })).json().matches;
    expect(only.length).toBeGreaterThan(0);
    expect(new Set(only.map((m: { file_id: string }) => m.file_id))).toEqual(new Set([ids.get('pet-policy.txt')]));

    const parent = (await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 'Logistics' } })).json();
    const child = (await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 'Abroad', parent_id: parent.id } })).json();
    await t.app.inject({ method: 'POST', url: `/api/v1/kb/files/${ids.get('international.txt')}/move`, headers: auth, payload: { folder_id: child.id } });
    await t.app.inject({ method: 'POST', url: `/api/v1/kb/files/${ids.get('shipping-times.txt')}/move`, headers: auth, payload: { folder_id: parent.id } });
    const inFolder = (await search({ query: 'Do you send orders abroad?', folder_id: parent.id })).json().matches;
    expect(new Set(inFolder.map((m: { file_id: string }) => m.file_id))).toEqual(new Set([ids.get('international.txt'), ids.get('shipping-times.txt')]));
    expect(inFolder[0]).toMatchObject({ file_id: ids.get('international.txt'), folder_id: child.id });
    const both = (await search({ query: 'Do you send orders abroad?', folder_id: parent.id, kb_id: ids.get('pet-policy.txt') })).json().matches;
    expect(both).toEqual([]);
  });

  test('bad searches: blank query and top_k out of range are 400; unknown folder 404 folder_not_found; unknown kb_id 404', async () => {
    expect((await search({ query: '  ' })).statusCode).toBe(400);
    expect((await search({ query: 'x', top_k: 21 })).statusCode).toBe(400);
    expect((await search({ query: 'x', top_k: 0 })).statusCode).toBe(400);
    expect((await search({})).json().message).toMatch(/body\.query/);
    const f = await search({ query: 'x', folder_id: 'fld_000000000000000000000000' });
    expect(f.statusCode).toBe(404);
    expect(f.json().error).toBe('folder_not_found');
    expect((await search({ query: 'x', kb_id: 'file_000000000000000000000000' })).statusCode).toBe(404);
  });
});

describe('the dense index follows one file at a time', () => {
  const dense = () => t.composition.denseIndex;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Notices arrive a moment after the change commits: wait for what must come true. */
  async function until(what: string, holds: () => Promise<boolean>): Promise<void> {
    for (let i = 0; i < 100; i++) {
      if (await holds()) return;
      await sleep(50);
    }
    throw new Error(`never came true: ${what}`);
  }
  const files = async (body: Record<string, unknown>) => (await search(body)).json().matches.map((m: { file_id: string }) => m.file_id) as string[];
  /** Shares no keyword with the passage below: only the dense side can find it. */
  const QUERY = 'Can I hire a bike?';
  const modelId = async () => (await t.composition.embedder()).modelId;

  test('indexed, moved, replaced by a new version, deleted: results follow without a workspace reload, and the matrix equals a fresh load', async () => {
    await search({ query: QUERY });
    const loads = dense().loads;
    const text = 'Bicycles can be rented at the front desk for ten euros a day.';

    const v1 = (await upload(t.app, auth, { filename: 'bikes.txt', content: text })).json();
    expect(await indexed(tw, v1.id)).toBe('active');
    await until('the indexed file ranks first', async () => (await files({ query: QUERY }))[0] === v1.id);

    const f = (await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 'Rentals' } })).json();
    await t.app.inject({ method: 'POST', url: `/api/v1/kb/files/${v1.id}/move`, headers: auth, payload: { folder_id: f.id } });
    await until('the moved file is found in its new folder', async () => (await files({ query: QUERY, folder_id: f.id }))[0] === v1.id);

    const v2 = (await upload(t.app, auth, { filename: 'bikes.txt', content: `${text} Helmets are free.` }, { folder_id: f.id })).json();
    expect(v2.version).toBe(2);
    // Replaced: the old version is never served, not even before the notice arrives.
    expect(await files({ query: QUERY })).not.toContain(v1.id);
    expect(await indexed(tw, v2.id)).toBe('active');
    await until('the new version ranks first', async () => (await files({ query: QUERY, folder_id: f.id }))[0] === v2.id);
    expect(await files({ query: QUERY })).not.toContain(v1.id);

    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/files/${v2.id}`, headers: auth })).statusCode).toBe(204);
    expect(await files({ query: QUERY })).not.toContain(v2.id);
    await until('the previous version is current again', async () => (await files({ query: QUERY, folder_id: f.id }))[0] === v1.id);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/files/${v1.id}`, headers: auth })).statusCode).toBe(204);
    expect(await files({ query: QUERY })).not.toContain(v1.id);
    await until('no passage of the document is left in the matrix', async () => {
      const v = await dense().vectors(workspaceId, await modelId());
      return !v.ids.some((_, i) => v.fileId(i) === v1.id || v.fileId(i) === v2.id);
    });

    expect(dense().loads).toBe(loads);
    const kept = await dense().vectors(workspaceId, await modelId());
    const keptRows = kept.ids.map((id, i) => [id, kept.fileId(i), kept.folderId(i)].join(' ')).sort();
    dense().invalidate(workspaceId);
    const fresh = await dense().vectors(workspaceId, await modelId());
    expect(dense().loads).toBe(loads + 1);
    expect(keptRows).toEqual(fresh.ids.map((id, i) => [id, fresh.fileId(i), fresh.folderId(i)].join(' ')).sort());
  });

  test('while the LISTEN connection is down nothing is cached; once back, one load is kept again', async () => {
    await search({ query: QUERY });
    const notifications = t.composition.notifications!;
    const loads = dense().loads;
    await search({ query: QUERY });
    expect(dense().loads).toBe(loads);
    await db.orm.em.fork().execute('select pg_terminate_backend(?)', [notifications.backendPid]);
    await until('the connection is seen lost', async () => !notifications.listening);
    await search({ query: QUERY });
    await search({ query: QUERY });
    expect(dense().loads).toBe(loads + 2);
    await until('the listener is back', async () => notifications.listening);
    await search({ query: QUERY });
    const after = dense().loads;
    await search({ query: QUERY });
    expect(dense().loads).toBe(after);
  });
});

describe('search without a usable embedding model', () => {
  test('answers 503 embeddings_unavailable with the reason, not a generic 500', async () => {
    const broken = await startTestApp({
      orm: db.orm,
      databaseUrl: db.url,
      serviceOptions: { embedder: lazyEmbedder(() => createEmbedder({ provider: 'local', modelsDir: '/nonexistent/models' })) },
    });
    try {
      const res = await broken.app.inject({ method: 'POST', url: '/api/v1/kb/search', headers: auth, payload: { query: 'refunds' } });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ error: 'embeddings_unavailable', message: expect.stringContaining('models:fetch') });
    } finally {
      await broken.close();
    }
  });
});

describe("a turn's retrieval (issue 32 item 6)", () => {
  test('a workspace with nothing indexed: the turn embeds nothing and searches nothing (no retrieve step); in an indexed workspace the same turn embeds its query and retrieves', async () => {
    // This composition's embeddings come from an OpenAI-compatible /v1/embeddings on loopback that counts what it is asked.
    const asked: string[][] = [];
    const server = http.createServer((req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (raw += c));
      req.on('end', () => {
        const body = JSON.parse(raw) as { model: string; input: string[] };
        asked.push(body.input);
        const data = body.input.map((_, index) => ({ object: 'embedding', index, embedding: [1, 0, 0, 0, 0, 0, 0, 0] }));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const s = await testServices(db, { embedder: lazyEmbedder(() => createEmbedder({ provider: 'openai', baseUrl, model: 'fake-embed', dimensions: 8, modelsDir: '' })) });
    const origin = 'https://shop.example';
    /** A visitor's message to a published agent of `ws` (answering from the whole workspace), answered by this composition's turn. */
    const turn = async (ws: string, text: string) => {
      const agentId = await publishedWebAgent(t.app, bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key), origin);
      const site = await t.services.sites.create(ws, agentId, [origin]);
      const conv = (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': site.site_id, origin }, payload: {} })).json();
      const messageId = newId('msg');
      await s.services.transcript.storeVisitorMessage({ id: messageId, workspaceId: ws, conversationId: conv.conversation_id, clientMessageId: `c-${messageId}`, text, uploadIds: [] });
      return s.services.turns.run({ conversationId: conv.conversation_id, workspaceId: ws, messageId, replyId: newId('msg') });
    };
    try {
      const empty = await turn(await createWorkspace(db.orm, 'Nothing indexed'), 'When can I visit your shop?');
      expect(asked).toEqual([]);
      expect(empty.trace!.steps.map((x) => x.step)).toEqual(['gather', 'generate', 'store', 'publish']);
      expect(empty.trace!.passages).toEqual([]);

      const found = await turn(workspaceId, 'SKU-48213X');
      expect(asked).toEqual([['SKU-48213X']]);
      expect(found.trace!.steps.map((x) => x.step)).toEqual(['retrieve', 'gather', 'generate', 'store', 'publish']);
      expect(found.trace!.passages[0]).toMatchObject({ file_name: 'sku-list.txt' });
    } finally {
      await s.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
