// The structured-extraction section: generated documents with known values (invoices,
// receipts, order emails, forms; as PDF, DOCX and scanned PDF) read by the isolated
// extractors (OCR for scans) and asked of the model exactly as the `extract` workflow
// asks it (domain/extraction askModel: json_schema response format, one repair turn, ajv),
// then compared field by field. Reports exact-match accuracy per field type, seconds per
// page, and the schema-validity rate (goal 100%).
//
// BENCH_EXTRACT_DOCS (32), BENCH_EXTRACT_SEED (7). The model: the local one from
// `npm run models:fetch` (BENCH_EXTRACT_LOCAL_MODEL, default qwen2.5-coder-1.5b-instruct-q4_k_m;
// threads CONCIERGE_BENCH_THREADS or 2), or an OpenAI-compatible server with
// BENCH_EXTRACT_BASE_URL / BENCH_EXTRACT_API_KEY / BENCH_EXTRACT_MODEL.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Document, Packer, Paragraph } from 'docx';
import PDFDocument from 'pdfkit';
import { loadConfig, modelsDir } from '../app/config';
import { askModel } from '../domain/extraction/extractions';
import { chunkText, mergePartials } from '../domain/extraction/merge';
import { compileUserSchema } from '../domain/extraction/schema';
import { extractDocument } from '../lib/extract';
import { DEFAULT_LOCAL_LLM, LocalLlmServer, llamaServerPath, localLlmPath, localServerFilesPresent } from '../providers/llm/local-server';
import { OpenAiCompatibleModel, type CompletionRequest, type CompletionResult } from '../providers/llm/model';
import { makeScannedPdf } from '../dev/fakes/documents';
import { childMain, runInChild, type Cleanup } from './lib/child';
import { envNumber } from './lib/load';
import { prng } from './lib/prose';
import type { Check, Result } from './lib/types';

type FieldType = 'string' | 'number' | 'integer' | 'date' | 'enum' | 'boolean' | 'email' | 'array';
type Format = 'pdf' | 'docx' | 'scanned-pdf';

interface Case {
  kind: string;
  format: Format;
  /** The document's lines. */
  lines: string[];
  schema: Record<string, unknown>;
  /** Expected value of each field, and its type for the per-type figures. */
  expected: Record<string, { value: unknown; type: FieldType }>;
}

const pick = <T>(rand: () => number, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
const money = (rand: () => number, lo: number, hi: number) => Math.round((lo + rand() * (hi - lo)) * 100) / 100;
const date = (rand: () => number) => `2025-${String(1 + Math.floor(rand() * 12)).padStart(2, '0')}-${String(1 + Math.floor(rand() * 28)).padStart(2, '0')}`;
const NAMES = ['Maria Santos', 'John Carter', 'Aiko Tanaka', 'Lena Fischer', 'Omar Haddad', 'Priya Nair', 'Lucas Moreau', 'Sofia Rossi'];
const COMPANIES = ['Harbor Cafe', 'Blue Fern Florists', 'Northwind Bikes', 'Cedar Dental', 'Lumen Studio', 'Pine & Co'];
const PRODUCTS = ['Espresso beans 1kg', 'Paper cups', 'Oat milk 6-pack', 'Descaler', 'Cleaning cloths', 'Napkins', 'Sugar sticks'];
const STORES = ['CORNER MARKET', 'CITY BAKERY', 'GREEN GROCER', 'BOOK NOOK'];
const REQUESTS = ['refund', 'exchange', 'cancellation', 'delivery_status'] as const;
const REQUEST_TEXT: Record<(typeof REQUESTS)[number], string> = {
  refund: 'I would like my money back for this order, please refund it to my card.',
  exchange: 'The shoes are too small; could I swap them for a size 42 instead?',
  cancellation: 'Please cancel the order, I no longer need it and it has not shipped yet.',
  delivery_status: 'Could you tell me where my parcel is? It has not arrived yet.',
};

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });

function invoice(rand: () => number, format: Format): Case {
  const items = Array.from({ length: 2 + Math.floor(rand() * 2) }, () => ({ name: pick(rand, PRODUCTS), quantity: 1 + Math.floor(rand() * 5), price: money(rand, 2, 40) }));
  const subtotal = Math.round(items.reduce((n, i) => n + i.quantity * i.price, 0) * 100) / 100;
  const total = Math.round(subtotal * 1.23 * 100) / 100;
  const number = `INV-${2025}-${String(Math.floor(rand() * 9000) + 1000)}`;
  const customer = pick(rand, COMPANIES);
  const issued = date(rand);
  return {
    kind: 'invoice',
    format,
    lines: [
      'ACME Supplies Ltd, 4 Mill Road, Porto',
      `INVOICE ${number}`,
      `Date: ${issued}`,
      `Bill to: ${customer}`,
      '',
      ...items.map((i) => `${i.quantity} x ${i.name} @ ${i.price.toFixed(2)} = ${(i.quantity * i.price).toFixed(2)}`),
      '',
      `Subtotal ${subtotal.toFixed(2)}`,
      `VAT 23% ${(total - subtotal).toFixed(2)}`,
      `Total due: ${total.toFixed(2)} EUR`,
    ],
    schema: obj({
      invoice_number: { type: 'string' },
      customer: { type: 'string', description: 'The party billed' },
      issued: { type: 'string', format: 'date' },
      total: { type: 'number', description: 'The total due, taxes included' },
      items: { type: 'array', items: obj({ name: { type: 'string' }, quantity: { type: 'integer' }, price: { type: 'number' } }) },
    }),
    expected: {
      invoice_number: { value: number, type: 'string' },
      customer: { value: customer, type: 'string' },
      issued: { value: issued, type: 'date' },
      total: { value: total, type: 'number' },
      items: { value: items.length, type: 'array' },
    },
  };
}

function receipt(rand: () => number, format: Format): Case {
  const store = pick(rand, STORES);
  const number = String(Math.floor(rand() * 90000) + 10000);
  const lines = Array.from({ length: 2 + Math.floor(rand() * 2) }, () => ({ name: pick(rand, ['COFFEE', 'BREAD', 'APPLES', 'MILK', 'TEA', 'CAKE']), price: money(rand, 1, 9) }));
  const total = Math.round(lines.reduce((n, l) => n + l.price, 0) * 100) / 100;
  const card = rand() < 0.5;
  return {
    kind: 'receipt',
    format,
    lines: [store, `RECEIPT ${number}`, ...lines.map((l) => `${l.name} ${l.price.toFixed(2)}`), `TOTAL ${total.toFixed(2)}`, card ? 'PAID BY CARD' : 'PAID CASH'],
    schema: obj({ store: { type: 'string' }, receipt_number: { type: 'string' }, total: { type: 'number' }, paid_by_card: { type: 'boolean' } }),
    expected: {
      store: { value: store, type: 'string' },
      receipt_number: { value: number, type: 'string' },
      total: { value: total, type: 'number' },
      paid_by_card: { value: card, type: 'boolean' },
    },
  };
}

function orderEmail(rand: () => number, format: Format): Case {
  const name = pick(rand, NAMES);
  const order = String(Math.floor(rand() * 900000) + 100000);
  const request = pick(rand, REQUESTS);
  return {
    kind: 'order email',
    format,
    lines: [`From: ${name} <${name.toLowerCase().replace(' ', '.')}@example.com>`, `Subject: Order ${order}`, '', 'Hello,', `this is about my order ${order}. ${REQUEST_TEXT[request]}`, '', `Thanks, ${name}`],
    schema: obj({ order_number: { type: 'string' }, customer_name: { type: 'string' }, request: { type: 'string', enum: [...REQUESTS, 'other'] } }),
    expected: {
      order_number: { value: order, type: 'string' },
      customer_name: { value: name, type: 'string' },
      request: { value: request, type: 'enum' },
    },
  };
}

function form(rand: () => number, format: Format): Case {
  const name = pick(rand, NAMES);
  const email = `${name.split(' ')[0].toLowerCase()}${Math.floor(rand() * 90) + 10}@example.org`;
  const phone = `+351 9${Math.floor(rand() * 9)}${String(Math.floor(rand() * 1_000_000)).padStart(6, '0')}`;
  const age = 18 + Math.floor(rand() * 60);
  return {
    kind: 'form',
    format,
    lines: ['Membership application', `Full name: ${name}`, `Email: ${email}`, `Phone: ${phone}`, `Age: ${age}`, 'Signed on arrival.'],
    schema: obj({ full_name: { type: 'string' }, email: { type: 'string', format: 'email' }, phone: { type: 'string' }, age: { type: 'integer' } }),
    expected: {
      full_name: { value: name, type: 'string' },
      email: { value: email, type: 'email' },
      phone: { value: phone, type: 'string' },
      age: { value: age, type: 'integer' },
    },
  };
}

/** The generated set: every kind in turn, formats rotating (scans are receipts and forms: short lines fit a scanned page). */
function generate(n: number, seed: number): Case[] {
  const rand = prng(seed);
  const out: Case[] = [];
  const makers = [invoice, receipt, orderEmail, form];
  for (let i = 0; i < n; i++) {
    const make = makers[i % makers.length];
    const formats: Format[] = make === receipt || make === form ? ['scanned-pdf', 'pdf', 'docx'] : ['pdf', 'docx'];
    out.push(make(rand, formats[Math.floor(i / makers.length) % formats.length]));
  }
  return out;
}

async function render(c: Case): Promise<Buffer> {
  if (c.format === 'scanned-pdf') return makeScannedPdf([c.lines.filter(Boolean)]);
  if (c.format === 'docx') return Packer.toBuffer(new Document({ sections: [{ children: c.lines.map((l) => new Paragraph(l)) }] }));
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const done = (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of doc) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  })();
  doc.addPage({ size: 'A4' });
  doc.fontSize(12).text(c.lines.join('\n'), 72, 72);
  doc.end();
  return done;
}

const same = (got: unknown, want: unknown, type: FieldType) => {
  if (type === 'array') return Array.isArray(got) && got.length === want;
  if (type === 'number') return typeof got === 'number' && Math.abs(got - (want as number)) < 0.005;
  if (typeof got === 'string' && typeof want === 'string') return got.trim().toLowerCase() === want.toLowerCase();
  return got === want;
};

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const n = Math.round(envNumber('BENCH_EXTRACT_DOCS', 32, 1));
  const seed = Math.round(envNumber('BENCH_EXTRACT_SEED', 7, 0));
  const config = loadConfig();
  let complete: (req: CompletionRequest) => Promise<CompletionResult>;
  let modelName: string;
  const remote = process.env.BENCH_EXTRACT_BASE_URL;
  if (remote) {
    modelName = process.env.BENCH_EXTRACT_MODEL ?? 'default';
    const model = new OpenAiCompatibleModel({ baseUrl: remote, apiKey: process.env.BENCH_EXTRACT_API_KEY, model: modelName, timeoutMs: 300_000 });
    complete = (req) => model.complete(req);
  } else {
    modelName = process.env.BENCH_EXTRACT_LOCAL_MODEL ?? DEFAULT_LOCAL_LLM;
    const dir = modelsDir(config);
    const binary = llamaServerPath(dir);
    const weights = localLlmPath(dir, modelName);
    if (!localServerFilesPresent(binary, weights)) throw new Error(`The local model is not installed under ${dir}: run npm run models:fetch (or set BENCH_EXTRACT_BASE_URL)`);
    const threads = Math.round(envNumber('CONCIERGE_BENCH_THREADS', 2, 1));
    const local = new LocalLlmServer({ binary, model: weights, modelName, threads, contextTokens: 4096, idleMs: 600_000 });
    cleanup.push(['local model server', () => local.stop()]);
    const started = performance.now();
    await local.use(async () => undefined);
    log(`  local model ${modelName} ready in ${((performance.now() - started) / 1000).toFixed(1)} s (${threads} threads)`);
    let client: OpenAiCompatibleModel | null = null;
    complete = (req) => local.use((baseUrl) => (client ??= new OpenAiCompatibleModel({ baseUrl, model: modelName, timeoutMs: 300_000 })).complete(req));
  }

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-extract-'));
  cleanup.push(['documents', async () => fs.rmSync(tmp, { recursive: true, force: true })]);
  const cases = generate(n, seed);
  const perType = new Map<FieldType, { right: number; total: number }>();
  const perKind = new Map<string, { right: number; total: number }>();
  const perFormat = new Map<Format, { seconds: number; pages: number }>();
  let valid = 0;
  let modelSeconds = 0;
  let pages = 0;
  let calls = 0;
  const misses: string[] = [];
  for (const [i, c] of cases.entries()) {
    const file = path.join(tmp, `doc${i}.${c.format === 'docx' ? 'docx' : 'pdf'}`);
    fs.writeFileSync(file, await render(c));
    const t0 = performance.now();
    const { segments } = await extractDocument({
      filePath: file,
      kind: c.format === 'docx' ? 'docx' : 'pdf',
      mime: c.format === 'docx' ? 'application/vnd.openxmlformats-officedocument.wordprocessingml.document' : 'application/pdf',
      fileName: path.basename(file),
    });
    const docPages = Math.max(1, new Set(segments.map((s) => s.page).filter(Boolean)).size);
    const schema = compileUserSchema(c.schema);
    const text = segments.map((s) => s.text).join('\n\n');
    const chunks = chunkText(text, config.STRUCTURED_CHUNK_CHARS);
    const t1 = performance.now();
    const answers = [];
    for (const [index, chunk] of chunks.entries()) {
      answers.push({ ...(await askModel(complete, schema, { text: chunk, prompt: null, part: chunks.length > 1 ? { index, count: chunks.length } : undefined })), index, chunk });
    }
    const t2 = performance.now();
    const merged = mergePartials(
      answers.filter((a) => a.data !== null).map((a) => ({ data: a.data, text: a.chunk })),
      (d) => schema.validate(d) as boolean,
    );
    const ok = merged !== null && (schema.validate(merged.data) as boolean);
    if (ok) valid++;
    calls += answers.reduce((k, a) => k + a.calls, 0);
    modelSeconds += (t2 - t1) / 1000;
    pages += docPages;
    const f = perFormat.get(c.format) ?? { seconds: 0, pages: 0 };
    f.seconds += (t2 - t0) / 1000;
    f.pages += docPages;
    perFormat.set(c.format, f);
    const data = (ok ? merged.data : {}) as Record<string, unknown>;
    let right = 0;
    for (const [field, want] of Object.entries(c.expected)) {
      const hit = same(data[field], want.value, want.type);
      if (hit) right++;
      else misses.push(`${c.kind}/${c.format} ${field}: got ${JSON.stringify(data[field])}, want ${JSON.stringify(want.value)}`);
      const t = perType.get(want.type) ?? { right: 0, total: 0 };
      t.right += hit ? 1 : 0;
      t.total++;
      perType.set(want.type, t);
    }
    const k = perKind.get(c.kind) ?? { right: 0, total: 0 };
    k.right += right;
    k.total += Object.keys(c.expected).length;
    perKind.set(c.kind, k);
    log(`  ${String(i + 1).padStart(2)}/${cases.length} ${c.kind} (${c.format}): ${right}/${Object.keys(c.expected).length} fields, ${ok ? 'valid' : 'INVALID'}, read ${((t1 - t0) / 1000).toFixed(1)} s, model ${((t2 - t1) / 1000).toFixed(1)} s`);
  }

  const pct = (r: { right: number; total: number }) => Math.round((1000 * r.right) / r.total) / 10;
  const allFields = [...perType.values()].reduce((a, b) => ({ right: a.right + b.right, total: a.total + b.total }), { right: 0, total: 0 });
  const validity = Math.round((1000 * valid) / cases.length) / 10;
  const checks: Check[] = [{ name: 'structured-extraction schema-validity rate', value: validity, unit: '%', goal: '100', pass: valid === cases.length }];
  const headlines = [
    `structured-extraction (${modelName}): ${cases.length} documents, field exact match ${pct(allFields)}% (${allFields.right}/${allFields.total})`,
    `  per field type: ${[...perType.entries()].map(([t, r]) => `${t} ${pct(r)}% (${r.right}/${r.total})`).join(', ')}`,
    `  per document kind: ${[...perKind.entries()].map(([t, r]) => `${t} ${pct(r)}%`).join(', ')}`,
    `  seconds per page (text reading + model): ${[...perFormat.entries()].map(([f, s]) => `${f} ${(s.seconds / s.pages).toFixed(1)}`).join(', ')}; model alone ${(modelSeconds / pages).toFixed(1)} s/page; ${calls} model calls (${calls - cases.length} repair turns)`,
  ];
  if (misses.length) log(`  misses:\n    ${misses.join('\n    ')}`);
  return {
    section: 'structured-extraction',
    description: 'Generated invoices, receipts, order emails and forms (PDF, DOCX, scanned PDF) through the extraction pipeline and the model: field accuracy, seconds per page, validity',
    settings: { documents: cases.length, seed, model: modelName, remote: Boolean(remote), chunkChars: config.STRUCTURED_CHUNK_CHARS },
    runs: [],
    targets: [],
    comparisons: [],
    checks,
    headlines,
    details: {
      accuracyPerFieldType: Object.fromEntries([...perType.entries()].map(([t, r]) => [t, { ...r, percent: pct(r) }])),
      accuracyPerKind: Object.fromEntries([...perKind.entries()].map(([t, r]) => [t, { ...r, percent: pct(r) }])),
      secondsPerPage: Object.fromEntries([...perFormat.entries()].map(([f, s]) => [f, Math.round((10 * s.seconds) / s.pages) / 10])),
      modelSecondsPerPage: Math.round((10 * modelSeconds) / pages) / 10,
      validityPercent: validity,
      modelCalls: calls,
      misses,
    },
  };
}

export function benchStructuredExtraction(log: (line: string) => void): Promise<Result> {
  return runInChild(__filename, 'structured-extraction', log);
}

if (require.main === module) childMain(measure);
