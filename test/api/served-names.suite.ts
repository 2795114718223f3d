import { Readable } from 'node:stream';
import { downloadName, servedContentType } from '../../api/stored-bytes';
import { signLink } from '../../domain/storage/signed-links';
import { bearer, createKey, createWorkspace, startTestApp, testBlobs, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { upload } from '../support/kb';

/**
 * Security report round 2, item 13: bytes served for others are saved under a name whose
 * extension says what is served, not what the uploader named them. PNG bytes named
 * `evil.html` download as `evil.png`; anything served as application/octet-stream as
 * `.bin`. Every place bytes are served goes through api/stored-bytes.ts: the signed
 * `/api/media/…` links (msgapp media, widget uploads, agents' KB attachments, recordings)
 * and the knowledge-base download.
 */
let db: TestDatabase;
let t: TestApp;
let auth: Record<string, string>;

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4c50000000049454e44ae426082', 'hex');

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
}, 60_000);
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

const disposition = (name: string) => `attachment; filename="${name}"; filename*=UTF-8''${encodeURIComponent(name)}`;

describe('the saved name follows the served type', () => {
  test.each([
    ['evil.html', 'image/png', 'evil.png'],
    ['evil.html', 'text/html', 'evil.bin'],
    ['drawing.svg', 'image/svg+xml', 'drawing.bin'],
    ['run.exe', 'application/pdf', 'run.pdf'],
    ['archive.tar.html', 'application/octet-stream', 'archive.tar.bin'],
    ['report', 'application/pdf', 'report.pdf'],
    ['Photo.JPEG', 'image/jpeg', 'Photo.JPEG'],
    ['policies.md', 'text/markdown', 'policies.md'],
    ['call-combined.ogg', 'audio/ogg; codecs=opus', 'call-combined.ogg'],
    ['.htaccess', 'text/plain', '.htaccess.txt'],
    ['', 'image/png', 'download.png'],
    [null, 'text/html', 'download.bin'],
  ])('%j served as %s is saved as %s', (name, declared, saved) => {
    expect(downloadName(name, servedContentType(declared))).toBe(saved);
  });

  test('a signed /api/media link to PNG bytes named evil.html (a visitor upload, a customer photo) downloads as evil.png', async () => {
    const sha256 = await testBlobs.commit(await testBlobs.stage(Readable.from([PNG]), 1024));
    const url = signLink(t.services.box, 'https://concierge.example', { sha256, mime: 'image/png', name: 'evil.html' });
    const res = await t.app.inject({ method: 'GET', url: new URL(url).pathname });
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({ 'content-type': 'image/png', 'content-disposition': disposition('evil.png'), 'x-content-type-options': 'nosniff' });
  });

  test('a signed /api/media link to bytes declared text/html downloads as .bin (application/octet-stream)', async () => {
    const html = Buffer.from('<html><script>alert(1)</script></html>');
    const sha256 = await testBlobs.commit(await testBlobs.stage(Readable.from([html]), 1024));
    const url = signLink(t.services.box, 'https://concierge.example', { sha256, mime: 'text/html', name: 'page.html' });
    const res = await t.app.inject({ method: 'GET', url: new URL(url).pathname });
    expect(res.headers).toMatchObject({ 'content-type': 'application/octet-stream', 'content-disposition': disposition('page.bin') });
  });

  test('a knowledge-base file of PNG bytes named evil.html downloads as evil.png; an HTML file as .bin', async () => {
    const png = await upload(t.app, auth, { filename: 'evil.html', content: PNG, type: 'text/html' });
    expect(png.statusCode).toBe(201);
    expect(png.json()).toMatchObject({ name: 'evil.html', mime_type: 'image/png' });
    const dl = await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${png.json().id}/download`, headers: auth });
    expect(dl.statusCode).toBe(200);
    expect(dl.headers).toMatchObject({ 'content-type': 'image/png', 'content-disposition': disposition('evil.png') });

    const html = await upload(t.app, auth, { filename: 'policies.html', content: '<!doctype html><html><body>Policies</body></html>', type: 'text/html' });
    expect(html.statusCode).toBe(201);
    const page = await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${html.json().id}/download`, headers: auth });
    expect(page.headers).toMatchObject({ 'content-type': 'application/octet-stream', 'content-disposition': disposition('policies.bin') });
  });
});
