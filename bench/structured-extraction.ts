// What this measures and how to read it: docs/benchmarks.md#structured-extraction
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, modelsDir } from '../app/config';
import { askModel } from '../domain/extraction/extractions';
import { chunkText, mergePartials } from '../domain/extraction/merge';
import { compileUserSchema } from '../domain/extraction/schema';
import { extractDocument } from '../lib/extract';
import { DEFAULT_LOCAL_LLM, LocalLlmServer, llamaServerPath, localLlmPath, localServerFilesPresent } from '../providers/llm/local-server';
import { OpenAiCompatibleModel, type CompletionRequest, type CompletionResult } from '../providers/llm/model';
import { generate, render, type FieldType, type Format } from '../dev/fakes/extraction-cases';
import { section, type Cleanup } from './lib/child';
import { envInt } from './lib/load';
import type { Check, Result } from './lib/types';

const same = (got: unknown, want: unknown, type: FieldType) => {
  if (type === 'array') return Array.isArray(got) && got.length === want;
  if (type === 'number') return typeof got === 'number' && Math.abs(got - (want as number)) < 0.005;
  if (typeof got === 'string' && typeof want === 'string') return got.trim().toLowerCase() === want.toLowerCase();
  return got === want;
};

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const n = envInt('BENCH_EXTRACT_DOCS', 32, 1);
  const seed = envInt('BENCH_EXTRACT_SEED', 7, 0);
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
    const threads = envInt('CONCIERGE_BENCH_THREADS', 2, 1);
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
  type Tally = { right: number; total: number };
  const perType = new Map<FieldType, Tally>();
  const perKind = new Map<string, Tally>();
  const tally = <K>(m: Map<K, Tally>, k: K, right: number, total: number) => {
    const t = m.get(k) ?? { right: 0, total: 0 };
    m.set(k, { right: t.right + right, total: t.total + total });
  };
  const perFormat = new Map<Format, { seconds: number; pages: number }>();
  let [valid, modelSeconds, pages, calls] = [0, 0, 0, 0];
  const misses: string[] = [];
  for (const [i, c] of cases.entries()) {
    const file = path.join(tmp, `doc${i}.${c.format === 'docx' ? 'docx' : 'pdf'}`);
    fs.writeFileSync(file, await render(c));
    const t0 = performance.now();
    const [kind, mime] = c.format === 'docx' ? (['docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'] as const) : (['pdf', 'application/pdf'] as const);
    const { segments } = await extractDocument({ filePath: file, kind, mime, fileName: path.basename(file) });
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
    const merged = mergePartials(answers.filter((a) => a.data !== null).map((a) => ({ data: a.data, text: a.chunk })), (d) => schema.validate(d) as boolean);
    const ok = merged !== null && (schema.validate(merged.data) as boolean);
    if (ok) valid++;
    calls += answers.reduce((k, a) => k + a.calls, 0);
    modelSeconds += (t2 - t1) / 1000;
    pages += docPages;
    const f = perFormat.get(c.format) ?? { seconds: 0, pages: 0 };
    perFormat.set(c.format, { seconds: f.seconds + (t2 - t0) / 1000, pages: f.pages + docPages });
    const data = (ok ? merged.data : {}) as Record<string, unknown>;
    let right = 0;
    for (const [field, want] of Object.entries(c.expected)) {
      const hit = same(data[field], want.value, want.type);
      if (hit) right++;
      else misses.push(`${c.kind}/${c.format} ${field}: got ${JSON.stringify(data[field])}, want ${JSON.stringify(want.value)}`);
      tally(perType, want.type, hit ? 1 : 0, 1);
    }
    tally(perKind, c.kind, right, Object.keys(c.expected).length);
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

export const benchStructuredExtraction = section(module, 'structured-extraction', measure);
