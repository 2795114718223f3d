import fs from 'node:fs';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, testBlobs, type TestApp } from '../support/app';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { historySteps, maybeRecordHistory, startTestWorker } from '../support/temporal';
import { LOCAL_DB_STEPS_PATCH } from '../../workflows/short-steps';
import { OUTCOME_ATTRIBUTE_PATCH } from '../../workflows/outcome';
import { indexWorkflowId } from '../../worker/outbox-sources';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let auth: Record<string, string>;

const MAX_UPLOAD = 256 * 1024;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, maxUploadBytes: MAX_UPLOAD });
  tw = await startTestWorker(db);
  dispatcher = await startIndexDispatcher(tw);
});
beforeEach(async () => {
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
});
afterAll(async () => {
  await t.close();
  await dispatcher.stop();
  await tw.close();
  await db.drop();
});

const get = async (id: string) => (await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${id}`, headers: auth })).json();
const list = async (query = '') => (await t.app.inject({ method: 'GET', url: `/api/v1/kb/files${query}`, headers: auth })).json();
const search = async (body: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/kb/search', headers: auth, payload: body });
const folder = async (name: string) => (await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name } })).json();

describe('knowledge-base files', () => {
  test('upload → 201 pending → indexed to active; get, list and download agree', async () => {
    const text = '# Returns\n\nItems can be returned within 30 days of delivery for a full refund.\n\n# Shipping\n\nWe ship to 40 countries.';
    const res = await upload(t.app, auth, { filename: 'policies.md', content: text, type: 'application/pdf' });
    expect(res.statusCode).toBe(201);
    const file = res.json();
    expect(file).toEqual({
      id: expect.stringMatching(/^file_/),
      name: 'policies.md',
      status: 'pending',
      mime_type: 'text/markdown',
      file_size: Buffer.byteLength(text),
      folder_id: null,
      chunk_count: 0,
      version: 1,
      error_message: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(await indexed(tw, file.id)).toBe('active');
    await maybeRecordHistory(tw.client, indexWorkflowId(file.id), 'kb-index-outcome');
    // The status writes ran as local activities (behind the patch); extraction and embedding through the task queue.
    expect(await historySteps(tw.client, indexWorkflowId(file.id))).toEqual({
      eager: false,
      activities: ['extractAndChunkFile', 'embedFileChunks'],
      localActivities: ['beginIndexing', 'finishIndexing'],
      patches: [LOCAL_DB_STEPS_PATCH, OUTCOME_ATTRIBUTE_PATCH],
    });
    const done = await get(file.id);
    expect(done).toMatchObject({ status: 'active', chunk_count: 2, error_message: null });
    expect((await list()).files.map((f: { id: string }) => f.id)).toEqual([file.id]);

    const dl = await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${file.id}/download`, headers: auth });
    expect(dl.statusCode).toBe(200);
    expect(dl.body).toBe(text);
    expect(dl.headers['content-type']).toMatch(/^text\/markdown/);
    expect(dl.headers['content-disposition']).toBe(`attachment; filename="policies.md"; filename*=UTF-8''policies.md`);
  });

  test('the type comes from the bytes: a PNG named .pdf is a PNG; junk is 415 unsupported_mime; empty is 400', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4c50000000049454e44ae426082', 'hex');
    const asPdf = await upload(t.app, auth, { filename: 'scan.pdf', content: png, type: 'application/pdf' });
    expect(asPdf.statusCode).toBe(201);
    expect(asPdf.json().mime_type).toBe('image/png');
    const junk = await upload(t.app, auth, { filename: 'data.bin', content: Buffer.from([0, 1, 2, 3, 255, 254, 0, 7, 9, 200]), type: 'text/plain' });
    expect(junk.statusCode).toBe(415);
    expect(junk.json()).toEqual({ error: 'unsupported_mime', message: expect.stringContaining('data.bin') });
    const empty = await upload(t.app, auth, { filename: 'empty.txt', content: '' });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().message).toBe('file: is empty');
  });

  test('over the size limit: 413 payload_too_large, and nothing is left behind', async () => {
    const tmp = () => fs.readdirSync(`${testBlobs.root}/tmp`);
    const before = (await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from kb_files'))[0].n;
    const res = await upload(t.app, auth, { filename: 'big.txt', content: 'a'.repeat(MAX_UPLOAD + 10) });
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toBe('payload_too_large');
    expect(tmp()).toEqual([]);
    expect((await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from kb_files'))[0].n).toBe(before);
  });

  test('bad uploads: no file, unknown folder, not multipart', async () => {
    const noFile = await t.app.inject({ method: 'POST', url: '/api/v1/kb/files', headers: { ...auth, 'content-type': 'multipart/form-data; boundary=x' }, payload: '--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nhello\r\n--x--\r\n' });
    expect(noFile.statusCode).toBe(400);
    expect(noFile.json().message).toBe('file: required');
    const badFolder = await upload(t.app, auth, { filename: 'a.txt', content: 'hello there' }, { folder_id: 'fld_000000000000000000000000' });
    expect(badFolder.statusCode).toBe(404);
    expect(badFolder.json().error).toBe('folder_not_found');
    const json = await t.app.inject({ method: 'POST', url: '/api/v1/kb/files', headers: auth, payload: { file: 'x' } });
    expect(json.statusCode).toBe(415);
  });

  test('a file with no text ends in error "no text could be extracted", never an empty active', async () => {
    const res = await upload(t.app, auth, { filename: 'blank.txt', content: '   \n\n   \n' });
    expect(res.statusCode).toBe(201);
    expect(await indexed(tw, res.json().id)).toBe('error');
    expect(await get(res.json().id)).toMatchObject({ status: 'error', error_message: 'no text could be extracted', chunk_count: 0 });
  });

  test('versions: the same name in the same folder is a new current version; deleting it restores the previous', async () => {
    const v1 = (await upload(t.app, auth, { filename: 'hours.txt', content: 'The support desk opens at 9am and closes at 5pm.' })).json();
    await indexed(tw, v1.id);
    const v2 = (await upload(t.app, auth, { filename: 'hours.txt', content: 'The support desk is now open around the clock, 24 hours a day.' })).json();
    expect(v2.version).toBe(2);
    await indexed(tw, v2.id);
    expect((await list()).files.map((f: { id: string }) => f.id)).toEqual([v2.id]);
    const now = (await search({ query: 'when does the support desk open' })).json().matches;
    expect(now.map((m: { file_id: string }) => m.file_id)).toEqual([v2.id]);

    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/files/${v2.id}`, headers: auth });
    expect(del.statusCode).toBe(204);
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${v2.id}`, headers: auth })).statusCode).toBe(404);
    expect((await list()).files.map((f: { id: string; version: number }) => [f.id, f.version])).toEqual([[v1.id, 1]]);
    const restored = (await search({ query: 'when does the support desk open' })).json().matches;
    expect(restored.map((m: { file_id: string }) => m.file_id)).toEqual([v1.id]);
    const [{ n }] = await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from kb_chunks where file_id = ?', [v2.id]);
    expect(Number(n)).toBe(0);
  });

  test('move: to a folder, to the root; unknown folder 404 folder_not_found; folder delete counts files', async () => {
    const f = (await upload(t.app, auth, { filename: 'move-me.txt', content: 'Gift cards never expire.' })).json();
    const dest = await folder('Billing');
    const moved = await t.app.inject({ method: 'POST', url: `/api/v1/kb/files/${f.id}/move`, headers: auth, payload: { folder_id: dest.id } });
    expect(moved.statusCode).toBe(200);
    expect(moved.json()).toMatchObject({ id: f.id, folder_id: dest.id });
    expect((await list(`?folder_id=${dest.id}`)).files.map((x: { id: string }) => x.id)).toEqual([f.id]);
    expect((await list()).files.map((x: { id: string }) => x.id)).not.toContain(f.id);
    const refused = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${dest.id}`, headers: auth });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ error: 'folder_not_empty', files: 1, subfolders: 0 });
    const unknown = await t.app.inject({ method: 'POST', url: `/api/v1/kb/files/${f.id}/move`, headers: auth, payload: { folder_id: 'fld_000000000000000000000000' } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toBe('folder_not_found');
    const back = await t.app.inject({ method: 'POST', url: `/api/v1/kb/files/${f.id}/move`, headers: auth, payload: { folder_id: null } });
    expect(back.json().folder_id).toBeNull();
  });

  test('delete removes the bytes when no other file holds them', async () => {
    const content = `unique bytes ${Date.now()}`;
    const f = (await upload(t.app, auth, { filename: 'gone.txt', content })).json();
    const [{ sha256 }] = await db.orm.em.fork().execute<{ sha256: string }[]>('select sha256 from kb_files where id = ?', [f.id]);
    expect(fs.existsSync(testBlobs.pathOf(sha256))).toBe(true);
    await indexed(tw, f.id);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/files/${f.id}`, headers: auth })).statusCode).toBe(204);
    expect(fs.existsSync(testBlobs.pathOf(sha256))).toBe(false);
  });

  test('cursor paging never skips or repeats a row while uploads continue', async () => {
    const first = [];
    for (let i = 0; i < 9; i++) first.push((await upload(t.app, auth, { filename: `page-${i}.txt`, content: `document number ${i}` })).json().id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      const [page]: [{ files: { id: string }[]; next_cursor: string | null }, unknown] = await Promise.all([
        list(`?limit=2${cursor ? `&cursor=${cursor}` : ''}`),
        upload(t.app, auth, { filename: `late-${round}.txt`, content: `uploaded while paging ${round}` }),
      ]);
      round++;
      seen.push(...page.files.map((f: { id: string }) => f.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of first) expect(seen).toContain(id);
  });

  test('list filters by status and validates its query', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/kb/files?limit=201', headers: auth })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/kb/files?status=done', headers: auth })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/kb/files?cursor=nope', headers: auth })).statusCode).toBe(400);
    const f = (await upload(t.app, auth, { filename: 'status.txt', content: 'status filter' })).json();
    await indexed(tw, f.id);
    expect((await list('?status=active')).files.map((x: { id: string }) => x.id)).toContain(f.id);
    expect((await list('?status=error')).files.map((x: { id: string }) => x.id)).not.toContain(f.id);
  });
});
