import fs from 'node:fs';
import os from 'node:os';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { OpenAiTranscriber } from '../../providers/speech/openai-transcriber';
import { OpenAiImageDescriber } from '../../providers/llm/vision';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { execFileSync } from 'node:child_process';
import type { SiteRow } from '../../domain/widget/sites';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, testBlobs, type TestApp, type TestOverrides } from '../support/app';
import { makeCorruptPdf, makeDocx, makePdf, makeTextPng, makeWav, randomBytes, TEXT } from '../../dev/fakes/documents';
import { multipart } from '../support/kb';
import { historySteps, maybeRecordHistory, startTestWorker, type TestWorker } from '../support/temporal';
import { LOCAL_DB_STEPS_PATCH } from '../../workflows/short-steps';
import { OUTCOME_ATTRIBUTE_PATCH } from '../../workflows/outcome';
import { WORKSPACE_ID } from '../../worker/namespace-attributes';
import { answerOf } from '../support/http-error';

/**
 * The widget's file endpoints on the real app and database: multipart uploads typed from
 * their bytes and extracted in the worker's isolated process (OCR, documents, audio through
 * an OpenAI-compatible transcription server on loopback), status, signed links, voice notes,
 * and search over long uploads with the real embedding model. Each API process here has
 * a worker configured like it (the same transcriber); the API processes themselves are
 * given an extractor that fails, so nothing is extracted in them.
 */
let db: TestDatabase;
let t: TestApp;
/** The same database served by a process with no transcriber configured. */
let bare: TestApp;
/** The same database served by a process whose transcriber has a base URL but no key (TRANSCRIBE_API_KEY unset). */
let keyless: TestApp;
/** An API process with no workflow service. */
let detached: TestApp;
/** An API and worker with a vision model (a fake OpenAI-compatible server that describes images). */
let seeing: TestApp;
let vision: FakeLlm;
/** The workers of t, bare and keyless. */
const workers: TestWorker[] = [];
/** Where uploads are extracted: the worker's extractor. */
let tw: TestWorker;
let ws: string;
let auth: Record<string, string>;
let agentId: string;
let site: { site_id: string; site_secret: string };
let conv: string;
let sttServer: http.Server;
const sttRequests: Array<{ url: string; hasModel: boolean; hasFile: boolean }> = [];
let nextTranscript = 'Hello, I would like to change my delivery address.';
/** When set, the transcription server answers this HTTP status (an OpenAI error body) instead. */
let sttFailure: number | null = null;

const ORIGIN = 'https://shop.example';
/** The API processes' extractor: extraction belongs to the worker. */
const apiMustNotExtract = async (): Promise<never> => {
  throw new Error('extraction ran in the API process');
};
const INDEX_CHARS = 3000;

beforeAll(async () => {
  // An OpenAI-compatible /v1/audio/transcriptions on loopback: multipart in, {text} out.
  sttServer = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      sttRequests.push({ url: req.url ?? '', hasModel: body.includes('name="model"'), hasFile: body.includes('name="file"') });
      // Like OpenAI: no bearer key is a 401.
      const status = req.headers.authorization ? sttFailure : 401;
      if (status) return void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'refused', type: 'invalid_request_error' } }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: nextTranscript }));
    });
  });
  await new Promise<void>((r) => sttServer.listen(0, '127.0.0.1', r));
  const sttUrl = `http://127.0.0.1:${(sttServer.address() as AddressInfo).port}`;
  const stt = new OpenAiTranscriber(sttUrl, 'test-key', 'whisper-1');

  db = await createTestDatabase();
  // An API and its worker, configured alike, in one process on the worker's native connection (as `npm start`: uploads start eagerly); the API must never extract.
  const pair = async (serviceOptions: TestOverrides) => {
    const w = await startTestWorker(db, serviceOptions);
    workers.push(w);
    return startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { ...serviceOptions, extract: apiMustNotExtract }, temporal: { client: w.client, taskQueue: w.taskQueue, eagerStart: true } });
  };
  t = await pair({ transcriber: stt, uploadIndexChars: INDEX_CHARS });
  tw = workers[0];
  bare = await pair({});
  vision = await startFakeLlm({
    reply: (body) => {
      const parts = body.messages[0].content as Array<{ type: string; image_url?: { url: string } }>;
      const image = parts.find((x) => x.type === 'image_url')?.image_url?.url ?? '';
      return { text: image.startsWith('data:image/jpeg;base64,') ? 'A test pattern of coloured bars.' : image.startsWith('data:image/png;base64,') ? 'A parcel with a torn corner.' : 'Nothing.' };
    },
  });
  seeing = await pair({ transcriber: stt, vision: new OpenAiImageDescriber({ baseUrl: vision.url, model: 'fake-vision' }) });
  keyless = await pair({ transcriber: new OpenAiTranscriber(sttUrl, '', 'whisper-1') });
  detached = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { extract: apiMustNotExtract } });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  agentId = await publishedAgent({ file_upload: true });
  site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  conv = await newConversation(site.site_id);
}, 60_000);
afterAll(async () => {
  await t.close();
  await bare.close();
  await seeing.close();
  await vision.close();
  await keyless.close();
  await detached.close();
  for (const w of workers) await w.close();
  await db.drop();
  await new Promise((r) => sttServer.close(r));
});

async function publishedAgent(web: Record<string, unknown>, publish = true): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Shop helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN], ...web } } },
  });
  const id = res.json().id as string;
  if (publish) await t.app.inject({ method: 'POST', url: `/api/v1/agents/${id}/publish`, headers: auth });
  return id;
}

const siteHeaders = (siteId = site.site_id) => ({ 'x-concierge-site': siteId, origin: ORIGIN });

async function newConversation(siteId: string, app = t): Promise<string> {
  const res = await app.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: siteHeaders(siteId), payload: {} });
  expect(res.statusCode).toBe(200);
  return res.json().conversation_id;
}

function upload(file: { name: string; content: Buffer | string }, fields: Record<string, string> = {}, opts: { siteId?: string; app?: TestApp } = {}) {
  const body = multipart([...Object.entries(fields).map(([name, value]) => ({ name, value })), { name: 'file', value: file.content, filename: file.name }]);
  return (opts.app ?? t).app.inject({ method: 'POST', url: '/api/public/widget/upload', headers: { ...siteHeaders(opts.siteId), ...body.headers }, payload: body.payload });
}

function transcribe(file: { name: string; content: Buffer | string }, app = t) {
  const body = multipart([{ name: 'file', value: file.content, filename: file.name }]);
  return app.app.inject({ method: 'POST', url: '/api/public/widget/transcribe', headers: { ...siteHeaders(), ...body.headers }, payload: body.payload });
}

const status = (uploadId: string, query = '', siteId = site.site_id) =>
  t.app.inject({ method: 'GET', url: `/api/public/widget/upload/${uploadId}${query}`, headers: siteHeaders(siteId) });

const fileUrl = (payload: { conversation_id: string; file_key: string }) => t.app.inject({ method: 'POST', url: '/api/public/widget/file_url', headers: siteHeaders(), payload });

async function download(url: string): Promise<Buffer> {
  // Links are absolute (on PUBLIC_BASE_URL, here the default address): the request goes to this app.
  const res = await t.app.inject({ method: 'GET', url: new URL(url).pathname });
  expect(res.statusCode).toBe(200);
  return res.rawPayload;
}

const uploadRows = async (conversationId: string) =>
  db.orm.em.fork().execute<{ id: string; status: string; content: string | null }[]>('select id, status, content from widget_uploads where conversation_id = ? order by created_at', [conversationId]);

const siteRow = async (siteId: string) => (await db.orm.em.fork().execute<SiteRow[]>('select * from sites where id = ?', [siteId]))[0];

describe('POST /upload: stored, typed from its bytes, extracted before the answer', () => {
  test('a PDF: 201 ready with a durable key and a signed link to the same bytes; status has the text length and a summary', async () => {
    const pdf = await makePdf();
    const res = await upload({ name: 'policy.pdf', content: pdf }, { conversation_id: conv });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      upload_id: expect.stringMatching(/^upl_[0-9a-f]{24}$/),
      file_id: expect.stringMatching(/^[0-9a-f]{64}$/),
      file_name: 'policy.pdf',
      file_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:3000\/api\/media\//),
      file_key: `upload/${body.upload_id}`,
      mime_type: 'application/pdf',
      status: 'ready',
    });
    expect((await download(body.file_url)).equals(pdf)).toBe(true);

    const st = await status(body.upload_id, `?conversation_id=${conv}`);
    expect(st.statusCode).toBe(200);
    expect(st.json()).toEqual({
      upload_id: body.upload_id,
      file_id: body.file_id,
      file_name: 'policy.pdf',
      file_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:3000\/api\/media\//),
      file_key: body.file_key,
      mime_type: 'application/pdf',
      status: 'ready',
      parsed_chars: expect.any(Number),
      summary: expect.stringContaining('Refund policy'),
      error_message: null,
    });
    const [row] = (await uploadRows(conv)).filter((r) => r.id === body.upload_id);
    expect(row.content).toContain(TEXT.pdfPage1);
    expect(row.content).toContain(TEXT.pdfPage2);
    expect(st.json().parsed_chars).toBe(row.content!.length);
  });

  test('a DOCX and a PNG (OCR) are read; the client-sent name is kept, the type comes from the bytes', async () => {
    const docx = await upload({ name: 'warranty.bin', content: await makeDocx() }, { conversation_id: conv });
    expect(docx.statusCode).toBe(201);
    expect(docx.json().mime_type).toBe('application/vnd.openxmlformats-officedocument.wordprocessingml.document');
    const png = await upload({ name: 'scan.png', content: await makeTextPng() }, { conversation_id: conv });
    expect(png.statusCode).toBe(201);
    expect(png.json().mime_type).toBe('image/png');
    const rows = new Map((await uploadRows(conv)).map((r) => [r.id, r]));
    expect(rows.get(docx.json().upload_id)!.content).toContain(TEXT.docxPara2);
    const ocr = rows.get(png.json().upload_id)!.content!.toUpperCase();
    for (const w of TEXT.ocrWords) expect(ocr).toContain(w);
  });

  test('a corrupt PDF: 400 invalid_request naming file, with the reason; the upload stays readable in status error, without links', async () => {
    const res = await upload({ name: 'broken.pdf', content: makeCorruptPdf() }, { conversation_id: conv });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^file: .*PDF/i), upload_id: expect.stringMatching(/^upl_/) });
    const st = (await status(res.json().upload_id)).json();
    expect(st).toMatchObject({ status: 'error', parsed_chars: null, summary: null, error_message: expect.stringMatching(/PDF/i), file_id: null, file_url: null, file_key: null });
    const workflowId = `widget-upload:${res.json().upload_id}`;
    await maybeRecordHistory(tw.client, workflowId, 'widget-upload-failed-outcome');
    // The error was written by a local activity, behind the patch.
    expect(await historySteps(tw.client, workflowId)).toMatchObject({ localActivities: ['failUploadExtraction'], patches: [LOCAL_DB_STEPS_PATCH, OUTCOME_ATTRIBUTE_PATCH] });
  });

  test("a photo with no text: 201 ready with parsed_chars 0 (not an error), and the status read has its file_id, file_url and file_key", async () => {
    const photo = await makeTextPng([]);
    const res = await upload({ name: 'photo.png', content: photo }, { conversation_id: conv });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toMatchObject({ mime_type: 'image/png', status: 'ready' });
    const st = await status(body.upload_id, `?conversation_id=${conv}`);
    expect(st.json()).toEqual({
      upload_id: body.upload_id,
      file_id: body.file_id,
      file_name: 'photo.png',
      file_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:3000\/api\/media\//),
      file_key: `upload/${body.upload_id}`,
      mime_type: 'image/png',
      status: 'ready',
      parsed_chars: 0,
      summary: null,
      error_message: null,
    });
    expect((await download(st.json().file_url)).equals(photo)).toBe(true);
    // Ready, so it can be attached to a message.
    expect(await t.services.uploads.forSend(await siteRow(site.site_id), conv, [body.upload_id])).toEqual([
      { id: body.upload_id, file_name: 'photo.png', mime_type: 'image/png', content: '', parsed_chars: 0 },
    ]);
  });

  test('audio is transcribed through the configured transcriber', async () => {
    nextTranscript = 'Please deliver the parcel to the back door.';
    const res = await upload({ name: 'note.wav', content: makeWav() }, { conversation_id: conv });
    expect(res.statusCode).toBe(201);
    expect(res.json().mime_type).toBe('audio/wav');
    expect(sttRequests.at(-1)).toEqual({ url: '/v1/audio/transcriptions', hasModel: true, hasFile: true });
    expect((await status(res.json().upload_id)).json()).toMatchObject({ status: 'ready', summary: 'Please deliver the parcel to the back door.' });
  });

  test('a long text gets a summary of ~200 characters cut at a word, with an ellipsis', async () => {
    const words = Array.from({ length: 80 }, (_, i) => `word${i}`).join(' ');
    const res = await upload({ name: 'words.txt', content: words }, { conversation_id: conv });
    const summary = (await status(res.json().upload_id)).json().summary as string;
    expect(summary.endsWith('…')).toBe(true);
    expect(summary.length).toBeLessThanOrEqual(201);
    expect(words.startsWith(summary.slice(0, -1) + ' ')).toBe(true);
  });

  test('the text is extracted in the worker, by the widget-upload workflow of the upload (workspace search attribute); the API process extracts nothing', async () => {
    const res = await upload({ name: 'where.txt', content: 'Extracted by the worker.' }, { conversation_id: conv });
    expect(res.statusCode).toBe(201);
    const workflowId = `widget-upload:${res.json().upload_id}`;
    const handle = tw.client.workflow.getHandle(workflowId);
    expect(await handle.result()).toEqual({ status: 'ready' });
    const described = await handle.describe();
    expect(described.status.name).toBe('COMPLETED');
    expect(described.typedSearchAttributes.get(WORKSPACE_ID)).toBe(ws);
    await maybeRecordHistory(tw.client, workflowId, 'widget-upload-outcome');
    // Its API shares the worker's native connection (as `npm start`): the upload was started eagerly.
    expect(await historySteps(tw.client, workflowId)).toEqual({ eager: true, activities: ['extractUpload'], localActivities: [], patches: [OUTCOME_ATTRIBUTE_PATCH] });
    expect((await status(res.json().upload_id)).json()).toMatchObject({ status: 'ready', summary: 'Extracted by the worker.' });
  });

  test('an upload without a conversation is accepted (attached by /send later)', async () => {
    const res = await upload({ name: 'loose.txt', content: 'A note without a conversation yet.' });
    expect(res.statusCode).toBe(201);
    const [row] = await db.orm.em.fork().execute<{ conversation_id: string | null; site_id: string }[]>('select conversation_id, site_id from widget_uploads where id = ?', [res.json().upload_id]);
    expect(row).toEqual({ conversation_id: null, site_id: site.site_id });
  });
});

describe('POST /upload: refusals, in the spec order, leave nothing behind', () => {
  test('an unpublished agent: 503 no_workflow_configured; upload toggle off: 403 file_upload_not_enabled', async () => {
    const draft = await t.services.sites.create(ws, await publishedAgent({ file_upload: true }, false), [ORIGIN]);
    const a = await upload({ name: 'a.txt', content: 'hello' }, {}, { siteId: draft.site_id });
    expect(a.statusCode).toBe(503);
    expect(a.json()).toEqual({ error: 'no_workflow_configured', message: expect.any(String) });
    const off = await t.services.sites.create(ws, await publishedAgent({ file_upload: false }), [ORIGIN]);
    const b = await upload({ name: 'a.txt', content: 'hello' }, {}, { siteId: off.site_id });
    expect(b.statusCode).toBe(403);
    expect(b.json()).toEqual({ error: 'file_upload_not_enabled', message: expect.any(String) });
  });

  test('a type not accepted: 400 unsupported_type, no upload recorded', async () => {
    const c = await newConversation(site.site_id);
    const res = await upload({ name: 'blob.bin', content: randomBytes(2048) }, { conversation_id: c });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'unsupported_type', message: expect.any(String) });
    expect(await uploadRows(c)).toEqual([]);
  });

  test("a conversation that is not this site's agent's web conversation, or another customer: 400 invalid_request naming the field", async () => {
    const other = await t.services.sites.create(ws, await publishedAgent({ file_upload: true }), [ORIGIN]);
    const foreign = await newConversation(other.site_id);
    const res = await upload({ name: 'a.txt', content: 'hello' }, { conversation_id: foreign });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^conversation_id: /) });
    const wrongCustomer = await upload({ name: 'a.txt', content: 'hello' }, { conversation_id: conv, customer_id: 'cus_000000000000000000000000' });
    expect(wrongCustomer.statusCode).toBe(400);
    expect(wrongCustomer.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^customer_id: /) });
  });

  test('over 25 MB: 413 payload_too_large, no upload recorded and no temporary file left', async () => {
    const c = await newConversation(site.site_id);
    const tmp = path.join(testBlobs.root, 'tmp');
    const before = fs.readdirSync(tmp).length;
    const res = await upload({ name: 'big.txt', content: Buffer.alloc(25 * 1024 * 1024 + 1, 0x61) }, { conversation_id: c });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ error: 'payload_too_large', message: expect.any(String) });
    expect(await uploadRows(c)).toEqual([]);
    expect(fs.readdirSync(tmp).length).toBe(before);
  });

  test('with 5 uploads of the conversation still processing: 400 too_many_files; with 4, the next is accepted', async () => {
    const c = await newConversation(site.site_id);
    const s = await siteRow(site.site_id);
    const processing = async (n: number) => {
      for (let i = 0; i < n; i++) {
        await db.orm.em.fork().execute(
          `insert into widget_uploads (id, workspace_id, site_id, conversation_id, file_name, mime_type, size_bytes, blob_key, status)
           values (?, ?, ?, ?, 'pending.txt', 'text/plain', 1, ?, 'processing')`,
          [`upl_${Math.random().toString(16).slice(2, 14).padEnd(24, '0')}`, s.workspace_id, s.id, c, 'a'.repeat(64)],
        );
      }
    };
    await processing(4);
    expect((await upload({ name: 'a.txt', content: 'fifth file' }, { conversation_id: c })).statusCode).toBe(201);
    await processing(1);
    const res = await upload({ name: 'b.txt', content: 'sixth file' }, { conversation_id: c });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'too_many_files', message: expect.any(String) });
  });

  test('the limit holds under a race: with 4 processing, of two simultaneous uploads exactly one is accepted', async () => {
    const c = await newConversation(site.site_id);
    const s = await siteRow(site.site_id);
    for (let i = 0; i < 4; i++) {
      await db.orm.em.fork().execute(
        `insert into widget_uploads (id, workspace_id, site_id, conversation_id, file_name, mime_type, size_bytes, blob_key, status)
         values (?, ?, ?, ?, 'pending.txt', 'text/plain', 1, ?, 'processing')`,
        [`upl_race${i}${'0'.repeat(19)}`, s.workspace_id, s.id, c, 'b'.repeat(64)],
      );
    }
    const [a, b] = await Promise.all([upload({ name: 'a.pdf', content: await makePdf() }, { conversation_id: c }), upload({ name: 'b.pdf', content: await makePdf(['Other text.']) }, { conversation_id: c })]);
    expect([a.statusCode, b.statusCode].sort()).toEqual([201, 400]);
    expect([a, b].find((r) => r.statusCode === 400)!.json().error).toBe('too_many_files');
  });

  test('no workflow service in the API process: 503 workflow_unavailable before the file is read; nothing recorded', async () => {
    const c = await newConversation(site.site_id);
    const res = await upload({ name: 'a.txt', content: 'hello' }, { conversation_id: c }, { app: detached });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'workflow_unavailable', message: expect.any(String) });
    expect(await uploadRows(c)).toEqual([]);
  });

  test('audio or video without a transcriber: 503 file_upload_prereq_failed (documents still work)', async () => {
    const res = await upload({ name: 'note.wav', content: makeWav() }, { conversation_id: conv }, { app: bare });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'file_upload_prereq_failed', message: expect.stringContaining('TRANSCRIBE_BASE_URL') });
    expect((await upload({ name: 'doc.txt', content: 'Plain text needs nothing external.' }, { conversation_id: conv }, { app: bare })).statusCode).toBe(201);
  });
});

describe('the transcriber as an upload prerequisite: only widget codes', () => {
  afterEach(() => (sttFailure = null));

  test('its key not configured (the service answers 401): upload and voice note are 503 missing_credential; the upload stays in error', async () => {
    const c = await newConversation(site.site_id);
    const up = await upload({ name: 'note.wav', content: makeWav() }, { conversation_id: c }, { app: keyless });
    expect(up.statusCode).toBe(503);
    expect(up.json()).toEqual({ error: 'missing_credential', message: expect.stringContaining('TRANSCRIBE_API_KEY') });
    expect(await uploadRows(c)).toEqual([{ id: expect.any(String), status: 'error', content: null }]);
    const note = await transcribe({ name: 'voice.wav', content: makeWav() }, keyless);
    expect(note.statusCode).toBe(503);
    expect(note.json()).toEqual({ error: 'missing_credential', message: expect.stringContaining('TRANSCRIBE_API_KEY') });
  });

  test('a key the service refuses (403) is also missing_credential', async () => {
    sttFailure = 403;
    const res = await transcribe({ name: 'voice.wav', content: makeWav() });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toBe('missing_credential');
  });

  test('the service failing (HTTP 500): 503 file_upload_prereq_failed, not a server API code', async () => {
    sttFailure = 500;
    const up = await upload({ name: 'note.wav', content: makeWav() }, { conversation_id: conv });
    expect(up.statusCode).toBe(503);
    expect(up.json()).toEqual({ error: 'file_upload_prereq_failed', message: expect.stringContaining('HTTP 500') });
    const note = await transcribe({ name: 'voice.wav', content: makeWav() });
    expect(note.statusCode).toBe(503);
    expect(note.json()).toEqual({ error: 'file_upload_prereq_failed', message: expect.stringContaining('HTTP 500') });
  });

  test('a silent recording is an upload with no text: 201 ready with parsed_chars 0', async () => {
    nextTranscript = '   ';
    const res = await upload({ name: 'silence.wav', content: makeWav() }, { conversation_id: conv });
    expect(res.statusCode).toBe(201);
    expect((await status(res.json().upload_id)).json()).toMatchObject({ status: 'ready', parsed_chars: 0, summary: null });
  });
});

describe('GET /upload/{upload_id}', () => {
  test("404 not_found for another site's upload, another conversation, or an unknown id", async () => {
    const up = (await upload({ name: 'x.txt', content: 'status check' }, { conversation_id: conv })).json().upload_id;
    const other = await t.services.sites.create(ws, agentId, [ORIGIN]);
    expect((await status(up, '', other.site_id)).json().error).toBe('not_found');
    expect((await status(up, `?conversation_id=${await newConversation(site.site_id)}`)).statusCode).toBe(404);
    expect((await status('upl_000000000000000000000000')).statusCode).toBe(404);
    expect((await status(up)).statusCode).toBe(200);
  });
});

describe('POST /file_url', () => {
  let kb: { inSub: string; outside: string; byId: string; inactive: string };

  beforeAll(async () => {
    const folders = t.services.folders;
    const top = await folders.create(ws, 'Manuals', null);
    const sub = await folders.create(ws, 'Printers', top.id);
    const elsewhere = await folders.create(ws, 'Internal', null);
    const file = async (name: string, folderId: string | null, active = true) => {
      const staged = await t.services.blobs.stage(Readable.from(Buffer.from(`Contents of ${name}`)), 1024);
      const f = await t.services.files.create(ws, { staged, name, folderId, mime: 'text/plain', kind: 'text' });
      if (active) await db.orm.em.fork().execute(`update kb_files set status = 'active' where id = ?`, [f.id]);
      return f.id;
    };
    kb = { inSub: await file('printer.txt', sub.id), outside: await file('salaries.txt', elsewhere.id), byId: await file('faq.txt', null), inactive: await file('draft.txt', top.id, false) };
    await t.services.agents.update(ws, agentId, { knowledge_base: { folder_ids: [top.id], file_ids: [kb.byId] } });
  });

  test("an upload of the conversation: a fresh link to its bytes; another conversation's upload: 403 forbidden", async () => {
    const up = (await upload({ name: 'mine.txt', content: 'my own file' }, { conversation_id: conv })).json();
    const res = await fileUrl({ conversation_id: conv, file_key: up.file_key });
    expect(res.statusCode).toBe(200);
    expect((await download(res.json().url)).toString()).toBe('my own file');
    const other = await newConversation(site.site_id);
    const denied = await fileUrl({ conversation_id: other, file_key: up.file_key });
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toEqual({ error: 'forbidden', message: expect.any(String) });
  });

  test("knowledge-base files in the agent's selection (a selected folder's subfolder, a selected file) are downloadable", async () => {
    const a = await fileUrl({ conversation_id: conv, file_key: `kb/${kb.inSub}` });
    expect(a.statusCode).toBe(200);
    expect((await download(a.json().url)).toString()).toBe('Contents of printer.txt');
    const b = await fileUrl({ conversation_id: conv, file_key: `kb/${kb.byId}` });
    expect((await download(b.json().url)).toString()).toBe('Contents of faq.txt');
  });

  test.each([
    ['a KB file outside the selection', () => `kb/${kb.outside}`],
    ['a KB file not active', () => `kb/${kb.inactive}`],
    ['garbage', () => '../../etc/passwd'],
    ['an unknown upload', () => 'upload/upl_000000000000000000000000'],
  ])('%s: 403 forbidden', async (_what, key) => {
    const res = await fileUrl({ conversation_id: conv, file_key: key() });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('forbidden');
  });

  test("a conversation that is not the site's: 403 forbidden even for a selected KB file", async () => {
    const other = await t.services.sites.create(ws, await publishedAgent({ file_upload: true }), [ORIGIN]);
    const res = await fileUrl({ conversation_id: await newConversation(other.site_id), file_key: `kb/${kb.byId}` });
    expect(res.statusCode).toBe(403);
  });
});

describe('POST /transcribe', () => {
  test('a voice note: its transcript, through the OpenAI-compatible endpoint; nothing is stored', async () => {
    nextTranscript = '  Where is my order?  ';
    const before = await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from widget_uploads');
    const res = await transcribe({ name: 'voice.wav', content: makeWav() });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ transcript: 'Where is my order?' });
    expect(sttRequests.at(-1)).toEqual({ url: '/v1/audio/transcriptions', hasModel: true, hasFile: true });
    expect(await db.orm.em.fork().execute('select count(*) as n from widget_uploads')).toEqual(before);
  });

  test('silence: 422 empty_transcript', async () => {
    nextTranscript = ' \n ';
    const res = await transcribe({ name: 'silence.wav', content: makeWav() });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'empty_transcript', message: expect.any(String) });
  });

  test('not audio by its bytes (whatever the name): 400 not_audio, the transcriber is not called', async () => {
    const calls = sttRequests.length;
    const res = await transcribe({ name: 'voice.wav', content: await makePdf() });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'not_audio', message: expect.any(String) });
    expect(sttRequests.length).toBe(calls);
  });

  test('no transcriber configured: 503 file_upload_prereq_failed (a widget code)', async () => {
    const res = await transcribe({ name: 'voice.wav', content: makeWav() }, bare);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'file_upload_prereq_failed', message: expect.stringContaining('TRANSCRIBE_BASE_URL') });
  });

  test('over 25 MB: 413 payload_too_large', async () => {
    const res = await transcribe({ name: 'long.wav', content: Buffer.alloc(25 * 1024 * 1024 + 1) });
    expect(res.statusCode).toBe(413);
  });
});

describe('attachments for /send and history', () => {
  test('forSend: a ready upload of the conversation, and a loose one of the site (then attached); describe re-signs links', async () => {
    const c = await newConversation(site.site_id);
    const own = (await upload({ name: 'own.txt', content: 'Own file text.' }, { conversation_id: c })).json().upload_id;
    const loose = (await upload({ name: 'loose.txt', content: 'Loose file text.' })).json().upload_id;
    const s = await siteRow(site.site_id);
    const files = await t.services.uploads.forSend(s, c, [own, loose, own]);
    expect(files).toEqual([
      { id: own, file_name: 'own.txt', mime_type: 'text/plain', content: 'Own file text.', parsed_chars: 14 },
      { id: loose, file_name: 'loose.txt', mime_type: 'text/plain', content: 'Loose file text.', parsed_chars: 16 },
    ]);
    expect((await uploadRows(c)).map((r) => r.id).sort()).toEqual([own, loose].sort());

    const described = await t.services.uploads.describe([loose, 'upl_000000000000000000000000', own]);
    expect(described.map((d) => [d.upload_id, d.file_key])).toEqual([
      [loose, `upload/${loose}`],
      [own, `upload/${own}`],
    ]);
    expect((await download(described[0].url)).toString()).toBe('Loose file text.');
  });

  test("forSend refuses another conversation's upload, an upload in error and another site's upload, naming the ref", async () => {
    const c = await newConversation(site.site_id);
    const s = await siteRow(site.site_id);
    const theirs = (await upload({ name: 'x.txt', content: 'theirs' }, { conversation_id: conv })).json().upload_id;
    const broken = (await upload({ name: 'broken.pdf', content: makeCorruptPdf() }, { conversation_id: c })).json().upload_id;
    await expect(answerOf(t.services.uploads.forSend(s, c, [theirs]))).resolves.toMatchObject({ status: 400, code: 'invalid_request', message: expect.stringContaining(theirs) });
    await expect(answerOf(t.services.uploads.forSend(s, c, [broken]))).resolves.toMatchObject({ status: 400, code: 'invalid_request', message: expect.stringContaining(broken) });
    const other = await siteRow((await t.services.sites.create(ws, agentId, [ORIGIN])).site_id);
    const loose = (await upload({ name: 'l.txt', content: 'loose' })).json().upload_id;
    await expect(t.services.uploads.forSend(other, c, [loose])).rejects.toMatchObject({ code: 'invalid_request' });
    // Refused refs are not attached.
    expect((await db.orm.em.fork().execute<{ conversation_id: string | null }[]>('select conversation_id from widget_uploads where id = ?', [loose]))[0].conversation_id).toBeNull();
  });
});

describe('search over long uploads', () => {
  const TOPICS = [
    'Quarterly revenue figures were reviewed by the finance committee and approved without changes.',
    'The marketing team scheduled the newsletter for the first Monday of every month.',
    'Office opening hours are nine to five on weekdays, with a shorter day on Fridays.',
    'New employees receive a laptop and a badge on their first morning at reception.',
    'The cafeteria menu rotates weekly and always includes a vegetarian option.',
  ];
  const NEEDLE = 'Spare bicycle tyres and inner tubes are kept in basement locker number 42, next to the bike pump.';

  test('a long text is indexed (idempotently) and its passages are ranked by meaning; short ones are not indexed', async () => {
    const c = await newConversation(site.site_id);
    const paragraphs: string[] = [];
    for (let i = 0; i < 40; i++) paragraphs.push(`${TOPICS[i % TOPICS.length]} Note ${i}.`);
    paragraphs.splice(23, 0, NEEDLE);
    const text = paragraphs.join('\n\n');
    expect(text.length).toBeGreaterThan(INDEX_CHARS);
    const long = (await upload({ name: 'handbook.txt', content: text }, { conversation_id: c })).json().upload_id;
    const short = (await upload({ name: 'short.txt', content: 'Short note about bicycle tyres.' }, { conversation_id: c })).json().upload_id;

    const uploads = t.services.uploads;
    const [longFile, shortFile] = await uploads.forSend(await siteRow(site.site_id), c, [long, short]);
    expect(t.services.uploadSearch.needsIndexing(longFile)).toBe(true);
    expect(t.services.uploadSearch.needsIndexing(shortFile)).toBe(false);

    const n = await t.services.uploadSearch.indexForSearch(long);
    expect(n).toBeGreaterThan(1);
    expect(await t.services.uploadSearch.indexForSearch(long)).toBe(n);
    const [{ count }] = await db.orm.em.fork().execute<{ count: string }[]>('select count(*) from widget_upload_chunks where upload_id = ?', [long]);
    expect(Number(count)).toBe(n);

    const hits = await t.services.uploadSearch.search(c, 'where are the bike tyres stored?', 3);
    expect(hits).toHaveLength(3);
    expect(hits[0]).toMatchObject({ upload_id: long, file_name: 'handbook.txt', text: expect.stringContaining('locker number 42') });
    expect(hits[0].score).toBeGreaterThan(hits[1].score);
    // Another conversation sees none of them.
    expect(await t.services.uploadSearch.search(await newConversation(site.site_id), 'bike tyres', 3)).toEqual([]);
  });
});

describe('init capabilities', () => {
  test('file_upload is on when the toggle is; a warning only when audio/video would lack a transcriber', async () => {
    const withStt = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: siteHeaders(), payload: {} });
    expect(withStt.json().capabilities.file_upload).toBe(true);
    // Audio and video are covered; without a vision model, images are read by OCR only.
    expect(withStt.json().capability_warnings).toEqual([expect.stringContaining('VISION_MODEL')]);
    const without = await bare.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: siteHeaders(), payload: {} });
    expect(without.json().capabilities.file_upload).toBe(true);
    expect(without.json().capability_warnings).toEqual([expect.stringContaining('TRANSCRIBE_BASE_URL'), expect.stringContaining('VISION_MODEL')]);
  });
});

describe('images and video with a vision model (VISION_MODEL)', () => {
  test('an image is described and OCR\'d; a video gets its transcript and three described key frames; init has no warning', async () => {
    const seeingConv = await newConversation(site.site_id, seeing);
    const init = await seeing.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: siteHeaders(), payload: {} });
    expect(init.json().capability_warnings).toBeUndefined();

    const photo = await upload({ name: 'parcel.png', content: await makeTextPng() }, { conversation_id: seeingConv }, { app: seeing });
    expect(photo.statusCode).toBe(201);
    const [image] = (await uploadRows(seeingConv)).filter((r) => r.id === photo.json().upload_id);
    expect(image.content).toMatch(/^What the image shows: A parcel with a torn corner\.\n\nText in it:\n/);

    // A 3-second test video with a tone, made here with ffmpeg.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vision-'));
    const file = path.join(dir, 'clip.mp4');
    execFileSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=duration=3:size=320x240:rate=10', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=3', '-shortest', '-pix_fmt', 'yuv420p', file]);
    nextTranscript = 'This is the box as it arrived.';
    const before = vision.requests.length;
    const video = await upload({ name: 'clip.mp4', content: fs.readFileSync(file) }, { conversation_id: seeingConv }, { app: seeing });
    fs.rmSync(dir, { recursive: true, force: true });
    expect(video.statusCode).toBe(201);
    const [clip] = (await uploadRows(seeingConv)).filter((r) => r.id === video.json().upload_id);
    expect(clip.content).toBe(
      ['What the video shows:', 'At 0:00: A test pattern of coloured bars.', 'At 0:01: A test pattern of coloured bars.', 'At 0:02: A test pattern of coloured bars.', '', 'Text in it:', 'This is the box as it arrived.'].join('\n'),
    );
    expect(vision.requests.length - before).toBe(3);
  });

  test('a vision model that fails leaves the OCR text', async () => {
    const failing = await startFakeLlm({ reply: () => ({ status: 500, text: 'down' }) });
    try {
      const w = await startTestWorker(db, { vision: new OpenAiImageDescriber({ baseUrl: failing.url, model: 'x' }) });
      workers.push(w);
      const paired = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { extract: apiMustNotExtract }, temporal: { client: w.client, taskQueue: w.taskQueue, eagerStart: true } });
      try {
        const c = await newConversation(site.site_id, paired);
        const res = await upload({ name: 'scan.png', content: await makeTextPng() }, { conversation_id: c }, { app: paired });
        expect(res.statusCode).toBe(201);
        const [row] = await uploadRows(c);
        expect(row.content).not.toContain('What the image shows');
        expect(row.content!.length).toBeGreaterThan(0);
      } finally {
        await paired.close();
      }
    } finally {
      await failing.close();
    }
  });
});
