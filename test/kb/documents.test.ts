import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { OpenAiTranscriber } from '../../providers/speech/openai-transcriber';
import { createExtractor } from '../../app/extractor';

import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import {
  makeCorruptPdf,
  makeCsv,
  makeDocx,
  makeEml,
  makeHtml,
  makePdf,
  makePptx,
  makeScannedPdf,
  makeTextPng,
  makeWav,
  makeXlsx,
  TEXT,
  tempDir,
  writeZipBombDocx,
} from '../../dev/fakes/documents';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';

/**
 * Real documents, generated here, through the whole path: multipart upload, byte
 * sniffing, the indexing workflow (isolated extraction, chunking, embedding), search.
 */
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let dispatcher: OutboxDispatcher;
let auth: Record<string, string>;
let transcriptionServer: http.Server;
const transcriptionRequests: string[] = [];
/** Answers the next transcription requests get instead of a transcript, in order. */
const transcriptionFailures: Array<{ status: number; message: string }> = [];

beforeAll(async () => {
  // An OpenAI-compatible transcription endpoint on loopback: multipart in, {text} out.
  transcriptionServer = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      transcriptionRequests.push(`${req.method} ${req.url} ${req.headers['content-type']?.split(';')[0]} ${Buffer.concat(chunks).includes('name="model"')}`);
      const failure = transcriptionFailures.shift();
      if (failure) {
        res.writeHead(failure.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: failure.message, type: 'server_error' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: 'Our call centre is staffed by friendly humans every weekday.' }));
    });
  });
  await new Promise<void>((r) => transcriptionServer.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(transcriptionServer.address() as AddressInfo).port}`;

  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  tw = await startTestWorker(db, { extract: createExtractor({ timeoutMs: 60_000, maxMemoryMb: 512, transcriber: new OpenAiTranscriber(base, 'test-key', 'whisper-1') }) });
  dispatcher = await startIndexDispatcher(tw);
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
}, 60_000);
afterAll(async () => {
  await t.close();
  await dispatcher.stop();
  await tw.close();
  await db.drop();
  await new Promise((r) => transcriptionServer.close(r));
});

async function index(filename: string, content: Buffer | string) {
  const res = await upload(t.app, auth, { filename, content });
  expect(res.statusCode).toBe(201);
  const file = res.json();
  const outcome = await indexed(tw, file.id);
  const row = (await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${file.id}`, headers: auth })).json();
  return { file, outcome, row };
}

const topFor = async (query: string) => (await t.app.inject({ method: 'POST', url: '/api/v1/kb/search', headers: auth, payload: { query, top_k: 3 } })).json().matches[0];

describe('documents of every kind, indexed end to end', () => {
  test.each([
    ['policy.pdf', () => makePdf(), 'application/pdf', TEXT.pdfPage2],
    ['warranty.docx', () => makeDocx(), 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', TEXT.docxPara2],
    ['prices.xlsx', () => makeXlsx(), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', 'Gadget'],
    // The spreadsheet and the CSV share rows; the CSV gets one of its own to be found by.
    ['stock.csv', async () => `${makeCsv()}Sprocket,1.25,700\n`, 'text/csv', 'Sprocket'],
    ['results.pptx', () => makePptx(), 'application/vnd.openxmlformats-officedocument.presentationml.presentation', TEXT.slide2Body],
    ['order.eml', () => makeEml(), 'message/rfc822', TEXT.emailAttachmentText],
    ['page.html', async () => makeHtml(), 'text/html', null],
    ['scan.png', () => makeTextPng(), 'image/png', 'INVOICE'],
    // A scanned PDF (no text layer) is OCR'd page by page; it used to end in error.
    ['scanned.pdf', () => makeScannedPdf([['RETURNS DESK', 'OPEN MONDAY']]), 'application/pdf', 'RETURNS DESK'],
  ] as const)('%s → active, findable', async (name, make, mime, phrase) => {
    const { file, outcome, row } = await index(name, await make());
    expect(file.mime_type).toBe(mime);
    expect({ outcome, status: row.status, error: row.error_message }).toEqual({ outcome: 'active', status: 'active', error: null });
    expect(row.chunk_count).toBeGreaterThan(0);
    if (phrase) {
      const top = await topFor(phrase);
      expect(top).toMatchObject({ file_id: file.id });
      expect(top.text).toContain(phrase);
    }
  }, 60_000);

  test('audio goes through the OpenAI-compatible transcriber', async () => {
    const { file, outcome } = await index('voicemail.wav', makeWav());
    expect(file.mime_type).toMatch(/^audio\//);
    expect(outcome).toBe('active');
    expect(transcriptionRequests.at(-1)).toMatch(/^POST \/v1\/audio\/transcriptions multipart\/form-data true$/);
    expect((await topFor('Who answers the phone at the call centre?')).file_id).toBe(file.id);
  }, 60_000);

  test('a transcription server that is busy once (503) is retried by the workflow, and the audio indexes', async () => {
    transcriptionFailures.push({ status: 503, message: 'The server is overloaded' });
    const before = transcriptionRequests.length;
    const { outcome, row } = await index('busy-line.wav', makeWav());
    expect({ outcome, status: row.status, error: row.error_message }).toEqual({ outcome: 'active', status: 'active', error: null });
    expect(transcriptionRequests.length - before).toBe(2);
  }, 60_000);

  test('a transcription the server rejects (400) ends in error with the reason, without a retry', async () => {
    transcriptionFailures.push({ status: 400, message: 'Invalid file format.' });
    const before = transcriptionRequests.length;
    const { outcome, row } = await index('rejected.wav', makeWav());
    expect(outcome).toBe('error');
    expect(row).toMatchObject({ status: 'error', error_message: 'transcription failed (HTTP 400)' });
    expect(transcriptionRequests.length - before).toBe(1);
  }, 60_000);

  test('a corrupt PDF ends in error with a reason; nothing stays in processing', async () => {
    const { file, outcome, row } = await index('broken.pdf', makeCorruptPdf());
    expect(file.mime_type).toBe('application/pdf');
    expect(outcome).toBe('error');
    expect(row).toMatchObject({ status: 'error', error_message: expect.stringMatching(/PDF/i), chunk_count: 0 });
  }, 60_000);

  test('a zip-bomb DOCX fails that file only, quickly, with a clear reason', async () => {
    const dir = tempDir();
    const bomb = path.join(dir, 'bomb.docx');
    writeZipBombDocx(bomb);
    const started = Date.now();
    const { outcome, row } = await index('bomb.docx', fs.readFileSync(bomb));
    expect(outcome).toBe('error');
    expect(row.error_message).toMatch(/zip bomb|size limit|memory/i);
    expect(Date.now() - started).toBeLessThan(30_000);
    // The worker is unharmed: the next document indexes.
    expect((await index('after-bomb.txt', 'Still standing after the bomb.')).outcome).toBe('active');
  }, 60_000);
});
