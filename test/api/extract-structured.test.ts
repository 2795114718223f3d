import { createHash } from 'node:crypto';
import { StructuredExtraction } from '../../db/entities';
import { MAX_SCHEMA_BYTES } from '../../domain/extraction/schema';
import { FILE_ID, OUTCOME, WORKSPACE_ID } from '../../worker/namespace-attributes';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { makeCorruptPdf, makeDocx, makePdf, makeScannedPdf, makeTextPng, TEXT } from '../../dev/fakes/documents';
import { startFakeLlm, type FakeLlm, type FakeLlmReply } from '../../dev/fakes/fake-llm';
import { multipart } from '../support/kb';
import { maybeRecordHistory, startTestWorker, type TestWorker } from '../support/temporal';

/**
 * POST /api/v1/documents/extract_structured on the real app, database and Temporal dev
 * server: the `extract:ext_…` workflow reads the file in the worker's isolated extraction
 * process (OCR for images) and asks a fake OpenAI-compatible server on loopback (the real
 * wire protocol) for JSON constrained by the schema; ajv validates every answer.
 */
let db: TestDatabase;
let llm: FakeLlm;
let tw: TestWorker;
let t: TestApp;
/** An API process with no extraction model configured. */
let noModel: TestApp;
/** An API process that waits only 1.5 s for an extraction. */
let impatient: TestApp;
/** An API process with no workflow service. */
let detached: TestApp;
let wsA: string;
let wsB: string;
let authA: Record<string, string>;
let authB: Record<string, string>;

/** Characters per model call in this file's worker: small, so a short document is read in several chunks. */
const CHUNK_CHARS = 600;
const MODEL = 'fake-extractor';

const apiMustNotExtract = async (): Promise<never> => {
  throw new Error('extraction ran in the API process');
};

/** The document part of a request's user message. */
const docOf = (body: any): string => {
  const user = (body.messages as Array<{ role: string; content: string }>).find((m) => m.role === 'user')?.content ?? '';
  return /"""\n([\s\S]*)\n"""/.exec(user)?.[1] ?? '';
};

/** What the fake model answers; each test sets it. */
let respond: (body: any, index: number) => FakeLlmReply | Promise<FakeLlmReply>;
const json = (v: unknown): FakeLlmReply => ({ text: JSON.stringify(v) });

const SUMMARY = {
  type: 'object',
  properties: { first_words: { type: 'string' }, has_text: { type: 'boolean' } },
  required: ['first_words', 'has_text'],
  additionalProperties: false,
};
const summaryAnswer = (body: any) => {
  const doc = docOf(body);
  return json({ first_words: doc.split(/\s+/).slice(0, 3).join(' '), has_text: doc.length > 0 });
};

const INVOICE = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    invoice_number: { type: 'string' },
    total: { type: 'number' },
    issued: { type: 'string', format: 'date' },
    items: {
      type: 'array',
      items: { type: 'object', properties: { name: { type: 'string' }, price: { type: 'number' } }, required: ['name', 'price'], additionalProperties: false },
    },
  },
  required: ['invoice_number', 'total', 'issued', 'items'],
  additionalProperties: false,
};
/** Reads an invoice the way a model would: what the text states, the fallbacks otherwise. */
const invoiceAnswer = (body: any) => {
  const doc = docOf(body);
  return json({
    invoice_number: /INV-\d+/.exec(doc)?.[0] ?? '',
    total: Number(/Total due: ([\d.]+)/.exec(doc)?.[1] ?? 0),
    issued: /Issued: (\d{4}-\d{2}-\d{2})/.exec(doc)?.[1] ?? '1970-01-01',
    items: [...doc.matchAll(/Item (\w+) costs ([\d.]+)/g)].map((m) => ({ name: m[1], price: Number(m[2]) })),
  });
};

beforeAll(async () => {
  llm = await startFakeLlm({ reply: (body, i) => respond(body, i) });
  db = await createTestDatabase();
  const structured = { llm: { baseUrl: llm.url, model: MODEL }, chunkChars: CHUNK_CHARS, maxChunks: 5 };
  tw = await startTestWorker(db, { structured });
  const temporal = { client: tw.client, taskQueue: tw.taskQueue, eagerStart: true };
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal, serviceOptions: { structured, extract: apiMustNotExtract } });
  noModel = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal, serviceOptions: { structured: { ...structured, llm: null }, extract: apiMustNotExtract } });
  impatient = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal, serviceOptions: { structured, extract: apiMustNotExtract }, config: { STRUCTURED_WAIT_MS: 1_500 } });
  detached = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { structured, extract: apiMustNotExtract } });
  wsA = await createWorkspace(db.orm);
  wsB = await createWorkspace(db.orm);
  authA = bearer((await createKey(t.services, wsA, ['documents:extract'])).key);
  authB = bearer((await createKey(t.services, wsB, ['documents:extract'])).key);
}, 60_000);

afterAll(async () => {
  for (const a of [t, noModel, impatient, detached]) await a?.close();
  await tw?.close();
  await db?.drop();
  await llm?.close();
});

beforeEach(() => {
  respond = summaryAnswer;
});

function extract(
  file: { name: string; content: Buffer | string } | null,
  fields: { schema?: unknown; prompt?: string; extra?: Record<string, string> } = {},
  opts: { auth?: Record<string, string>; app?: TestApp } = {},
) {
  const parts: Array<{ name: string; value: string | Buffer; filename?: string }> = [];
  if (fields.schema !== undefined) parts.push({ name: 'schema', value: typeof fields.schema === 'string' ? fields.schema : JSON.stringify(fields.schema) });
  if (fields.prompt !== undefined) parts.push({ name: 'prompt', value: fields.prompt });
  for (const [name, value] of Object.entries(fields.extra ?? {})) parts.push({ name, value });
  if (file) parts.push({ name: 'file', value: file.content, filename: file.name });
  const body = multipart(parts);
  return (opts.app ?? t).app.inject({
    method: 'POST',
    url: '/api/v1/documents/extract_structured',
    headers: { ...(opts.auth ?? authA), ...body.headers },
    payload: body.payload,
  });
}

/** A text file no other test sends (stored results are per file, schema and prompt). */
let n = 0;
const uniqueTxt = (text = 'Hello from the test document.') => ({ name: 'note.txt', content: `${text}\nref ${++n} ${Date.now()}\n` });

async function rowsOf(workspaceId: string) {
  return db.orm.em.fork().find(StructuredExtraction, { workspaceId }, { orderBy: { createdAt: 'asc' } });
}

describe('refusals', () => {
  test('400 missing_schema without a schema; 400 invalid_request without a file or with an empty one', async () => {
    const none = await extract(uniqueTxt());
    expect(none.statusCode).toBe(400);
    expect(none.json()).toEqual({ error: 'missing_schema', message: expect.stringContaining('schema') });
    const blank = await extract(uniqueTxt(), { schema: '  ' });
    expect(blank.json().error).toBe('missing_schema');
    const noFile = await extract(null, { schema: SUMMARY });
    expect(noFile.statusCode).toBe(400);
    expect(noFile.json()).toMatchObject({ error: 'invalid_request', message: 'file: required' });
    const empty = await extract({ name: 'empty.txt', content: '' }, { schema: SUMMARY });
    expect(empty.statusCode).toBe(400);
    expect(empty.json()).toMatchObject({ error: 'invalid_request', message: 'file: is empty' });
  });

  test('400 invalid_request naming a field the form does not take (the document says additionalProperties: false)', async () => {
    const res = await extract(uniqueTxt(), { schema: SUMMARY, extra: { model: 'gpt-4o' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_request', message: 'body.model: unknown field (the form takes file, schema and prompt)' });
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    expect(doc.components.schemas.ExtractStructuredForm.additionalProperties).toBe(false);
  });

  test.each([
    ['not JSON', '{"type": "object",', /not valid JSON/],
    ['not an object', '[1, 2]', /must be a JSON object/],
    ['a string', '"object"', /must be a JSON object/],
    ['not a valid JSON Schema', { type: 'object', properties: { a: { type: 'strnig' } } }, /not a valid JSON Schema/],
    ['minLength not a number', { type: 'object', properties: { a: { type: 'string', minLength: 'x' } } }, /not a valid JSON Schema/],
    ['a remote $ref', { type: 'object', properties: { a: { $ref: 'https://example.com/schema.json' } } }, /points outside the schema.*nothing is fetched/],
    [
      'a recursive schema',
      { type: 'object', properties: { root: { $ref: '#/$defs/node' } }, $defs: { node: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/$defs/node' } } } } } },
      /recursive/,
    ],
    ['mutually recursive definitions', { type: 'object', properties: { a: { $ref: '#/$defs/a' } }, $defs: { a: { properties: { b: { $ref: '#/$defs/b' } } }, b: { properties: { a: { $ref: '#/$defs/a' } } } } }, /recursive/],
    ['a $dynamicRef', { type: 'object', properties: { a: { $dynamicRef: '#node' } } }, /\$dynamicRef is not supported/],
    ['an unknown $schema', { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }, /draft-04.*not supported/],
    ['a root that is not an object', { type: 'array', items: { type: 'string' } }, /root must have "type": "object"/],
    ['an unsatisfiable schema (false)', { type: 'object', properties: { a: false }, required: ['a'] }, /unsatisfiable/],
    ['an unsatisfiable schema (bounds)', { type: 'object', properties: { n: { type: 'integer', minimum: 5, maximum: 1 } }, required: ['n'] }, /unsatisfiable.*minimum greater than maximum/],
    ['an empty enum', { type: 'object', properties: { s: { enum: [] } }, required: ['s'] }, /unsatisfiable.*empty enum/],
    ['a schema nested too deep', (() => {
      let s: Record<string, unknown> = { type: 'string' };
      for (let i = 0; i < 40; i++) s = { type: 'object', properties: { x: s } };
      return s;
    })(), /deeper than/],
  ])('400 bad_schema with the reason: %s', async (_what, schema, reason) => {
    const before = llm.requests.length;
    const res = await extract(uniqueTxt(), { schema });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('bad_schema');
    expect(res.json().message).toMatch(reason);
    expect(llm.requests.length).toBe(before);
  });

  test('400 bad_schema for a schema over the size limit, however it is cut', async () => {
    const props: Record<string, unknown> = {};
    for (let i = 0; props && JSON.stringify(props).length < MAX_SCHEMA_BYTES + 100; i++) props[`field_${i}`] = { type: 'string', description: 'x'.repeat(40) };
    const res = await extract(uniqueTxt(), { schema: { type: 'object', properties: props } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'bad_schema', message: expect.stringMatching(/larger than 64 KB/) });
  });

  test('415 unsupported_mime for types outside PDF, DOCX, TXT, PNG, JPEG, WEBP (decided from the bytes, not the name)', async () => {
    const gif = Buffer.from('GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;', 'latin1');
    for (const file of [
      { name: 'pixel.gif', content: gif },
      { name: 'data.csv', content: 'a,b\n1,2\n' },
      { name: 'report.pdf', content: Buffer.from([0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]) },
    ]) {
      const res = await extract(file, { schema: SUMMARY });
      expect({ name: file.name, status: res.statusCode, error: res.json().error }).toEqual({ name: file.name, status: 415, error: 'unsupported_mime' });
    }
  });

  test('403 insufficient_scope without documents:extract; 401 without a key', async () => {
    const other = bearer((await createKey(t.services, wsA, ['kb:read'])).key);
    const res = await extract(uniqueTxt(), { schema: SUMMARY }, { auth: other });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('insufficient_scope');
    const anon = await extract(uniqueTxt(), { schema: SUMMARY }, { auth: {} });
    expect(anon.statusCode).toBe(401);
  });

  test('503 llm_not_configured when no extraction model is configured; 503 workflow_unavailable without a workflow service', async () => {
    const res = await extract(uniqueTxt(), { schema: SUMMARY }, { app: noModel });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'llm_not_configured', message: expect.stringMatching(/STRUCTURED_BASE_URL.*LLM_BASE_URL/) });
    const off = await extract(uniqueTxt(), { schema: SUMMARY }, { app: detached });
    expect(off.statusCode).toBe(503);
    expect(off.json().error).toBe('workflow_unavailable');
  });
});

describe('the pipeline', () => {
  test('TXT: the model gets the text and the schema as response_format json_schema (strict), and the answer is validated and returned with the model', async () => {
    const before = llm.requests.length;
    const res = await extract({ name: 'hello.txt', content: 'Dear team, the parcel arrived damaged.\n' }, { schema: SUMMARY, prompt: 'Be brief.' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { first_words: 'Dear team, the', has_text: true }, model: MODEL });
    expect(llm.requests.length).toBe(before + 1);
    const body = llm.requests[before].body;
    expect(body.model).toBe(MODEL);
    expect(body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'extraction', schema: SUMMARY, strict: true } });
    expect(body.messages[1].content).toContain('Instructions: Be brief.');
    expect(docOf(body)).toBe('Dear team, the parcel arrived damaged.');

    // The workflow is `extract:ext_…`, findable by workspace and by the file's SHA-256; its usage is recorded.
    const [row] = (await rowsOf(wsA)).filter((r) => r.fileName === 'hello.txt');
    const handle = tw.client.workflow.getHandle(`extract:${row.id}`);
    const described = await handle.describe();
    expect(described.typedSearchAttributes.get(WORKSPACE_ID)).toBe(wsA);
    expect(described.typedSearchAttributes.get(FILE_ID)).toBe(createHash('sha256').update('Dear team, the parcel arrived damaged.\n').digest('hex'));
    expect(row).toMatchObject({ status: 'succeeded', modelCalls: 1, chunkCount: 1 });
    expect(described.typedSearchAttributes.get(OUTCOME)).toBe('succeeded');
    expect(row.promptTokens).toBeGreaterThan(0);
    expect(row.completionTokens).toBeGreaterThan(0);
    await maybeRecordHistory(tw.client, `extract:${row.id}`, 'structured-extraction-outcome');
  });

  test('a schema that strict mode cannot take as it is (optional properties) is sent with strict: false, and still validated', async () => {
    const loose = { type: 'object', properties: { first_words: { type: 'string' }, has_text: { type: 'boolean' } }, required: ['first_words'] };
    const before = llm.requests.length;
    const res = await extract(uniqueTxt('Loose schemas are fine.'), { schema: loose });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ first_words: 'Loose schemas are', has_text: true });
    expect(llm.requests[before].body.response_format.json_schema.strict).toBe(false);
  });

  test('PDF, DOCX, PNG (OCR), JPEG (OCR) and a scanned PDF (OCR page by page): the text read in the worker reaches the model', async () => {
    const cases: Array<[string, Buffer, string[]]> = [
      ['doc.pdf', await makePdf(), [TEXT.pdfPage1, TEXT.pdfPage2]],
      ['doc.docx', await makeDocx(), [TEXT.docxPara1, TEXT.docxPara2]],
      ['scan.png', await makeTextPng(), ['INVOICE']],
      ['scan.jpg', await makeTextPng(['RECEIPT', 'TOTAL'], 'jpeg'), ['RECEIPT']],
      ['scanned.pdf', await makeScannedPdf([['ORDER 5150'], ['TOTAL 99.00']]), ['ORDER 5150', 'TOTAL 99.00']],
    ];
    for (const [name, content, expected] of cases) {
      const before = llm.requests.length;
      const res = await extract({ name, content }, { schema: SUMMARY });
      expect({ name, status: res.statusCode }).toEqual({ name, status: 200 });
      expect(res.json().data.has_text).toBe(true);
      const doc = docOf(llm.requests[before].body);
      for (const text of expected) expect({ name, doc }).toEqual({ name, doc: expect.stringContaining(text) });
    }
    const rows = await rowsOf(wsA);
    const pdf = rows.find((r) => r.fileName === 'doc.pdf')!;
    expect(pdf.pages).toBe(2);
    expect(rows.find((r) => r.fileName === 'scanned.pdf')?.pages).toBe(2);
    // Billed once, by its pages.
    expect(await db.orm.em.fork().execute('select kind, quantity, workspace_id from usage_records where extraction_id = ?', [pdf.id])).toEqual([
      { kind: 'structured_extraction', quantity: 2, workspace_id: wsA },
    ]);
  }, 120_000);

  test('a long document is read in chunks and the answers merged: arrays concatenated, scalars from the chunk that states them', async () => {
    respond = invoiceAnswer;
    const filler = (s: string) => `${s} ${'This paragraph is here to fill the page with words. '.repeat(8)}`;
    const text = [
      filler('Invoice INV-2047. Issued: 2026-03-14.'),
      filler('Item Widget costs 9.99 and ships today.'),
      filler('Item Gadget costs 24.50 and ships tomorrow.'),
      filler('Total due: 34.49 within thirty days.'),
    ].join('\n\n');
    const before = llm.requests.length;
    const res = await extract({ name: 'invoice.txt', content: text }, { schema: INVOICE });
    expect(res.statusCode).toBe(200);
    expect(llm.requests.length - before).toBe(4);
    expect(res.json().data).toEqual({
      invoice_number: 'INV-2047',
      total: 34.49,
      issued: '2026-03-14',
      items: [
        { name: 'Widget', price: 9.99 },
        { name: 'Gadget', price: 24.5 },
      ],
    });
    // Each call saw one part and was told so.
    expect(llm.requests[before].body.messages[1].content).toContain('part 1 of 4');
    const [row] = (await rowsOf(wsA)).filter((r) => r.fileName === 'invoice.txt');
    expect(row).toMatchObject({ chunkCount: 4, modelCalls: 4 });
  });

  test('a document over the chunk limit: 422 extraction_failed, no model call', async () => {
    const before = llm.requests.length;
    const res = await extract({ name: 'long.txt', content: 'word '.repeat(CHUNK_CHARS * 2) }, { schema: SUMMARY });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'extraction_failed', message: expect.stringMatching(/too long/) });
    expect(llm.requests.length).toBe(before);
  });
});

describe('repair turn and failures', () => {
  test('an answer that does not validate gets one repair turn that quotes the errors; the repaired answer is returned', async () => {
    respond = (body) => (body.messages.length === 2 ? json({ invoice_number: 1234, total: 'a lot', issued: 'yesterday', items: [] }) : invoiceAnswer(body));
    const before = llm.requests.length;
    const res = await extract(uniqueTxt('Invoice INV-77. Issued: 2026-01-02. Item Lamp costs 12.00 today. Total due: 12.00'), { schema: INVOICE });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ invoice_number: 'INV-77', total: 12, issued: '2026-01-02', items: [{ name: 'Lamp', price: 12 }] });
    expect(llm.requests.length - before).toBe(2);
    const repair = llm.requests[before + 1].body.messages;
    expect(repair).toHaveLength(4);
    expect(repair[2]).toEqual({ role: 'assistant', content: JSON.stringify({ invoice_number: 1234, total: 'a lot', issued: 'yesterday', items: [] }) });
    expect(repair[3].role).toBe('user');
    expect(repair[3].content).toContain('/invoice_number: must be string');
    expect(repair[3].content).toContain('/total: must be number');
    // ajv-formats: a date that is not a date is an error too.
    expect(repair[3].content).toContain('/issued: must match format "date"');
  });

  test('still invalid after the repair turn (or not JSON at all): 422 extraction_failed after exactly two calls, and the next identical request tries again', async () => {
    respond = () => ({ text: 'Sorry, I cannot help with that.' });
    const file = uniqueTxt('Nothing useful here.');
    const before = llm.requests.length;
    const res = await extract(file, { schema: INVOICE });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'extraction_failed', message: expect.stringMatching(/does not validate.*not valid JSON/) });
    expect(llm.requests.length - before).toBe(2);
    // A failure is not a stored answer: the same request runs again (and may succeed).
    respond = invoiceAnswer;
    const again = await extract(file, { schema: INVOICE });
    expect(again.statusCode).toBe(200);
    expect(again.json().data.invoice_number).toBe('');
    expect(llm.requests.length - before).toBe(3);
  });

  test('an image with no text and a corrupt PDF: 422 extraction_failed with the reason, no model call, no workflow left running', async () => {
    const before = llm.requests.length;
    const blank = await extract({ name: 'blank.png', content: await makeTextPng([]) }, { schema: SUMMARY });
    expect(blank.statusCode).toBe(422);
    expect(blank.json()).toEqual({ error: 'extraction_failed', message: 'no text was found in the image' });
    const corrupt = await extract({ name: 'broken.pdf', content: makeCorruptPdf() }, { schema: SUMMARY });
    expect(corrupt.statusCode).toBe(422);
    expect(corrupt.json().error).toBe('extraction_failed');
    expect(llm.requests.length).toBe(before);
    const rows = (await rowsOf(wsA)).filter((r) => r.fileName === 'blank.png' || r.fileName === 'broken.pdf');
    expect(rows.map((r) => r.status)).toEqual(['failed', 'failed']);
    for (const r of rows) expect((await tw.client.workflow.getHandle(`extract:${r.id}`).describe()).status.name).toBe('COMPLETED');
    await maybeRecordHistory(tw.client, `extract:${rows[0].id}`, 'structured-extraction-unreadable');
  }, 60_000);

  test('a server without structured outputs (400 naming response_format): asked again in JSON mode, and ajv still decides', async () => {
    respond = (body) => (body.response_format?.type === 'json_schema' ? { status: 400, text: "'response_format.type' must be 'json_object' or 'text'" } : summaryAnswer(body));
    const before = llm.requests.length;
    const res = await extract(uniqueTxt('JSON mode only here.'), { schema: SUMMARY });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ first_words: 'JSON mode only', has_text: true });
    expect(llm.requests.slice(before).map((r) => r.body.response_format.type)).toEqual(['json_schema', 'json_object']);
  });

  test('a model that refuses the request for another reason (HTTP 400): 503 model_unavailable with its reason, not retried', async () => {
    respond = () => ({ status: 400, text: 'This model is not available on your plan' });
    const before = llm.requests.length;
    const res = await extract(uniqueTxt(), { schema: SUMMARY });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ error: 'model_unavailable', message: expect.stringContaining('This model is not available on your plan') });
    expect(llm.requests.length - before).toBe(1);
  });
});

describe('stored results', () => {
  test('the same file, schema and prompt in the workspace are answered from the stored result; another prompt or schema runs again', async () => {
    let calls = 0;
    respond = (body) => {
      calls++;
      return json({ first_words: `answer ${calls}`, has_text: docOf(body).length > 0 });
    };
    const file = uniqueTxt('Stored results are kept per workspace.');
    const first = await extract(file, { schema: SUMMARY, prompt: 'p1' });
    expect(first.statusCode).toBe(200);
    // The same schema with its keys in another order is the same schema.
    const reordered = { additionalProperties: false, required: SUMMARY.required, properties: SUMMARY.properties, type: 'object' };
    const second = await extract(file, { schema: reordered, prompt: 'p1' });
    expect(second.statusCode).toBe(200);
    // The same body, keys in the order the model gave them (jsonb would reorder them).
    expect(second.body).toBe(first.body);
    expect(Object.keys(second.json().data)).toEqual(['first_words', 'has_text']);
    expect(calls).toBe(1);
    const otherPrompt = await extract(file, { schema: SUMMARY, prompt: 'p2' });
    expect(otherPrompt.json().data.first_words).toBe('answer 2');
    expect(calls).toBe(2);
  });

  test('two tenants: workspace A’s stored result is never served to workspace B', async () => {
    let calls = 0;
    respond = () => json({ first_words: `call ${++calls}`, has_text: true });
    const file = uniqueTxt('Shared by two tenants.');
    const a = await extract(file, { schema: SUMMARY }, { auth: authA });
    const b = await extract(file, { schema: SUMMARY }, { auth: authB });
    expect(a.json().data.first_words).toBe('call 1');
    expect(b.json().data.first_words).toBe('call 2');
    expect(calls).toBe(2);
    // Each is served its own afterwards.
    expect((await extract(file, { schema: SUMMARY }, { auth: authB })).json().data.first_words).toBe('call 2');
    expect((await extract(file, { schema: SUMMARY }, { auth: authA })).json().data.first_words).toBe('call 1');
    expect(calls).toBe(2);
    expect((await rowsOf(wsB)).every((r) => r.workspaceId === wsB)).toBe(true);
  });

  test('two identical requests at once share one workflow and one model call', async () => {
    let calls = 0;
    respond = async (body) => {
      calls++;
      await new Promise((r) => setTimeout(r, 300));
      return summaryAnswer(body);
    };
    const file = uniqueTxt('Twice at once.');
    const [x, y] = await Promise.all([extract(file, { schema: SUMMARY }), extract(file, { schema: SUMMARY })]);
    expect([x.statusCode, y.statusCode]).toEqual([200, 200]);
    expect(x.json()).toEqual(y.json());
    expect(calls).toBe(1);
  });

  test('past the wait limit: 504 extraction_timeout with the workflow id; the run goes on and the same request then gets its result', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let calls = 0;
    respond = async (body) => {
      calls++;
      await held;
      return summaryAnswer(body);
    };
    const file = uniqueTxt('A slow model.');
    const res = await extract(file, { schema: SUMMARY }, { app: impatient });
    expect(res.statusCode).toBe(504);
    expect(res.json()).toEqual({
      error: 'extraction_timeout',
      message: expect.stringMatching(/did not finish within 2 s/),
      workflow_id: expect.stringMatching(/^extract:ext_[0-9a-f]{24}$/),
      extraction_id: expect.stringMatching(/^ext_[0-9a-f]{24}$/),
    });
    release();
    await tw.client.workflow.getHandle(res.json().workflow_id).result();
    const again = await extract(file, { schema: SUMMARY }, { app: impatient });
    expect(again.statusCode).toBe(200);
    expect(again.json().data).toEqual({ first_words: 'A slow model.', has_text: true });
    expect(calls).toBe(1);
  });
});
