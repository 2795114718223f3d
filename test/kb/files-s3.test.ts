import { DeleteObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import { MOTO_CREDENTIALS, startMoto, type MotoServer } from '../support/moto';
import { recordSecret } from '../support/secret-log';
import { loadConfig } from '../../app/config';
import { blobStoreFromConfig } from '../../app/storage';
import { S3BlobStore } from '../../providers/storage/s3-blob-store';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The knowledge base with STORAGE_DRIVER=s3: the app, the indexing worker and the
 * reference counting of FileService over a real S3-compatible server (moto).
 */
const BUCKET = 'concierge-kb';
let moto: MotoServer;
let store: S3BlobStore;
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let auth: Record<string, string>;

beforeAll(async () => {
  moto = await startMoto();
  await moto.createBucket(BUCKET);
  recordSecret('s3 secret access key', MOTO_CREDENTIALS.secretAccessKey);
  // Built from the settings exactly as the production entries build it.
  const built = blobStoreFromConfig(
    loadConfig({
      STORAGE_DRIVER: 's3',
      S3_BUCKET: BUCKET,
      S3_ENDPOINT: moto.endpoint,
      S3_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
      S3_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
      CONCIERGE_STORAGE_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-s3-tmp-')),
    }),
  );
  expect(built).toBeInstanceOf(S3BlobStore);
  store = built as S3BlobStore;
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { blobs: store } });
  tw = await startTestWorker(db, { blobs: store });
  dispatcher = await startIndexDispatcher(tw);
}, 120_000);
beforeEach(async () => {
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
});
afterAll(async () => {
  await t?.close();
  await dispatcher?.stop();
  await tw?.close();
  await db?.drop();
  store?.close();
  await moto?.stop();
});

const inBucket = async (sha256: string) => {
  try {
    await moto.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `blobs/${sha256}` }));
    return true;
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false;
    throw err;
  }
};
const shaOf = async (fileId: string) =>
  (await db.orm.em.fork().execute<{ sha256: string }[]>('select sha256 from kb_files where id = ?', [fileId]))[0].sha256;
const download = (id: string) => t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${id}/download`, headers: auth });
const remove = (id: string) => t.app.inject({ method: 'DELETE', url: `/api/v1/kb/files/${id}`, headers: auth });

describe('knowledge base on the S3 driver', () => {
  test('upload stores the bytes in the bucket, indexing extracts them, download streams them back', async () => {
    const text = `# Returns\n\nItems can be returned within 30 days (${Date.now()}).`;
    const res = await upload(t.app, auth, { filename: 'returns.md', content: text });
    expect(res.statusCode).toBe(201);
    const file = res.json();
    const sha = await shaOf(file.id);
    expect(await inBucket(sha)).toBe(true);

    // The extractor read the object through withLocalFile (a temp copy of the object).
    expect(await indexed(tw, file.id)).toBe('active');
    const got = (await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${file.id}`, headers: auth })).json();
    expect(got.chunk_count).toBeGreaterThan(0);

    const dl = await download(file.id);
    expect(dl.statusCode).toBe(200);
    expect(dl.body).toBe(text);
    expect(Number(dl.headers['content-length'])).toBe(Buffer.byteLength(text));
  });

  test('the object is deleted with the last file that references it, not before', async () => {
    const content = `shared bytes ${Date.now()}`;
    const a = (await upload(t.app, auth, { filename: 'a.txt', content })).json();
    const b = (await upload(t.app, auth, { filename: 'b.txt', content })).json();
    const sha = await shaOf(a.id);
    expect(await shaOf(b.id)).toBe(sha);
    await indexed(tw, a.id);
    await indexed(tw, b.id);

    expect((await remove(a.id)).statusCode).toBe(204);
    expect(await inBucket(sha)).toBe(true);
    expect((await download(b.id)).body).toBe(content);

    expect((await remove(b.id)).statusCode).toBe(204);
    expect(await inBucket(sha)).toBe(false);
  });

  test('a file whose object vanished from the bucket downloads as 410 content_gone', async () => {
    const f = (await upload(t.app, auth, { filename: 'vanish.txt', content: `vanishing ${Date.now()}` })).json();
    await indexed(tw, f.id);
    await moto.client.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: `blobs/${await shaOf(f.id)}` }));
    const res = await download(f.id);
    expect(res.statusCode).toBe(410);
    expect(res.json().error).toBe('content_gone');
  });
});
