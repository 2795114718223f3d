// What this measures and how to read it: docs/benchmarks.md#kb-indexing
import { loadConfig } from '../app/config';
import { passageVectors } from '../providers/embeddings/embedder';
import { section, type Cleanup } from './lib/child';
import { envInt, envNumber, loadSettings } from './lib/load';
import { benchApi, benchEmbedder, benchTemporal, benchWorker, createKey, setUpBench } from './lib/setup';
import { around, compareTargets, now, round1, runStats, summarizeTarget, waitFor } from './lib/stats';
import { makeHandbookPdf } from '../dev/fakes/documents';
import type { Result, RunStats } from './lib/types';

const TARGET_RATIO = 0.8;
const WARMUP_PAGES = 3;
const sec = (msValue: number) => (msValue / 1000).toFixed(msValue >= 10_000 ? 1 : 2);

const settings = () => ({
  pages: envInt('BENCH_KB_PAGES', 100, 1), wordsPerPage: envInt('BENCH_KB_WORDS_PER_PAGE', 420, 20), timeoutSeconds: envNumber('BENCH_KB_TIMEOUT_SECONDS', 900, 1),
  rounds: loadSettings().rounds, embedThreads: loadConfig().CONCIERGE_EMBED_THREADS,
});

type Step = 'begin' | 'extractAndChunk' | 'embed' | 'finish';

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);
  const { db, workspaceId } = bench;

  const generated = now();
  const [{ pdf, words }, warmup] = await Promise.all([makeHandbookPdf(s.pages, s.wordsPerPage), makeHandbookPdf(WARMUP_PAGES, s.wordsPerPage, 7)]);
  log(`  generated a ${s.pages}-page PDF (${words} words, ${(pdf.length / 1024).toFixed(0)} KB) in ${sec(now() - generated)} s`);

  // ---- An API process, and a worker process whose indexing steps and workflow starts are timed from outside.
  const embedder = benchEmbedder(bench, loadConfig().CONCIERGE_EMBED_THREADS);
  const api = await benchApi(bench);
  const { url: apiUrl } = api;
  const key = await createKey(api.c.services, workspaceId, ['kb:read', 'kb:write']);
  type Mark = `${Step}:${'start' | 'end'}` | 'dispatch:start' | 'dispatch:end';
  const marks = new Map<string, Partial<Record<Mark, number>>>();
  const mark = (fileId: string, what: Mark) => void marks.set(fileId, { ...marks.get(fileId), [what]: now() });
  const dev = await benchTemporal(bench);
  const workerStarted = now();
  const worker = await benchWorker(bench, dev, { overrides: { embedder: async () => embedder } }, (c) => {
    for (const step of ['begin', 'extractAndChunk', 'embed', 'finish'] as const) {
      around(c.indexing as unknown as Record<Step, (fileId: string) => Promise<unknown>>, step, (fileId) => mark(fileId, `${step}:start`), (_r, fileId) => mark(fileId, `${step}:end`));
    }
    const fileOf = (opts: { args?: unknown }) => (opts.args as Array<{ fileId: string }>)[0].fileId;
    around(c.temporal!.client.workflow, 'start', (_t, opts) => mark(fileOf(opts), 'dispatch:start'), (_h, _t, opts) => mark(fileOf(opts), 'dispatch:end'));
  });
  const indexing = worker.indexing;
  const bundleMs = now() - workerStarted;
  log(`  setup: API ${apiUrl}, Temporal dev server ${dev.address} (SQLite file), one worker with the outbox relay (started in ${sec(bundleMs)} s)`);

  // ---- Upload through the API, then poll the row until it settles.
  async function uploadAndWait(name: string, bytes: Buffer) {
    const started = now();
    const form = new FormData();
    form.append('file', new Blob([bytes], { type: 'application/pdf' }), name);
    const res = await fetch(`${apiUrl}/api/v1/kb/files`, { method: 'POST', headers: { authorization: `Bearer ${key.key}` }, body: form });
    const body = (await res.json()) as { id?: string; status?: string; mime_type?: string };
    if (res.status !== 201 || !body.id) throw new Error(`upload of ${name} answered ${res.status}: ${JSON.stringify(body)}`);
    if (body.mime_type !== 'application/pdf') throw new Error(`upload of ${name} sniffed as ${body.mime_type}, expected application/pdf`);
    const accepted = now();
    const fileId = body.id;
    let row = { status: 'pending', chunk_count: 0, error_message: null as string | null };
    const settledYet = async () => {
      [row] = await db.orm.em.fork().execute<(typeof row)[]>('select status, chunk_count, error_message from kb_files where id = ?', [fileId]);
      return row.status === 'active' || row.status === 'error';
    };
    await waitFor(settledYet, s.timeoutSeconds * 1000, () => `${name} still '${row.status}'`, 50);
    if (row.status === 'error') throw new Error(`${name} ended in error: ${row.error_message}`);
    return { fileId, started, accepted, settled: now(), chunks: row.chunk_count };
  }

  // ---- Warm-up: the model loaded, one small file through the whole path.
  const t = now();
  const modelLoadMs = await embedder.load().then(() => now() - t);
  const warm = await uploadAndWait('warm-up.pdf', warmup.pdf);
  log(`  warm-up: model loaded in ${sec(modelLoadMs)} s; a ${WARMUP_PAGES}-page PDF (${warm.chunks} passages) indexed in ${sec(now() - t - modelLoadMs)} s`);

  // ---- The measured upload.
  const e2e = await uploadAndWait('support-handbook.pdf', pdf);
  const m = marks.get(e2e.fileId)!;
  const at = (k: keyof typeof m) => m[k] ?? NaN;
  const totalMs = e2e.settled - e2e.started;
  const stages: Array<[string, number]> = [
    // The NOTIFY fires at the upload's commit, so the dispatcher may start before the 201 reaches the client.
    ['upload POST -> dispatcher starts the workflow (commit, NOTIFY)', at('dispatch:start') - e2e.started],
    ['start RPC sent -> begin activity running', at('begin:start') - at('dispatch:start')],
    ['begin', at('begin:end') - at('begin:start')],
    ['-> extract and chunk (extraction process, passages written)', at('extractAndChunk:end') - at('extractAndChunk:start')],
    ['-> embed (read, embed, write back)', at('embed:end') - at('embed:start')],
    ['-> finish', at('finish:end') - at('finish:start')],
    ['gaps between activities (workflow tasks)', at('finish:end') - at('begin:start') - (['begin', 'extractAndChunk', 'embed', 'finish'] as const).reduce((sum, st) => sum + at(`${st}:end`) - at(`${st}:start`), 0)],
    ['finish -> poll saw active', e2e.settled - at('finish:end')],
  ];
  // The passages as the pipeline embeds them (heading prepended when the text lacks it).
  const rows = await worker.em.fork().execute<{ text: string; heading: string | null }[]>('select text, heading from kb_chunks where file_id = ? order by ordinal', [e2e.fileId]);
  const texts = rows.map((r) => (r.heading && !r.text.includes(r.heading) ? `${r.heading}\n${r.text}` : r.text));
  const e2eEmbedRate = e2e.chunks / ((at('embed:end') - at('embed:start')) / 1000);
  log(`  ${s.pages}-page PDF: upload -> active in ${sec(totalMs)} s (${(s.pages / (totalMs / 1000)).toFixed(2)} pages/s), ${e2e.chunks} passages; the 201 after ${sec(e2e.accepted - e2e.started)} s; stages:`);
  for (const [label, v] of stages) log(`    ${label.padEnd(62)} ${sec(v).padStart(7)} s  ${((v / totalMs) * 100).toFixed(0).padStart(3)}%`);

  // ---- The embedding step vs the embedder on the same texts, interleaved (the order alternating).
  const runs: RunStats[] = [];
  const timed1 = async (target: string, round: number, f: () => Promise<number>) => {
    const t0 = now();
    const n = await f();
    if (n !== texts.length) throw new Error(`${target} embedded ${n} passages, expected ${texts.length}`);
    const ms = now() - t0;
    runs.push(runStats(target, round, ms / 1000, n, [ms], 1, {}));
  };
  const raw = (round: number) => timed1('raw embedder', round, async () => (await passageVectors(embedder, texts)).length);
  const pipeline = async (round: number) => {
    await worker.em.fork().execute('update kb_chunks set embedding = null, embedding_model = null, embedding_dim = null where file_id = ?', [e2e.fileId]);
    await timed1('pipeline embed', round, () => indexing.embed(e2e.fileId));
  };
  for (let round = 1; round <= s.rounds; round++) {
    for (const f of round % 2 === 1 ? [raw, pipeline] : [pipeline, raw]) await f(round);
    log(`  round ${round}: ${runs.slice(-2).map((r) => `${r.target} ${r.requestsPerSec.toFixed(1)} chunks/s`).join(', ')}`);
  }
  const [{ missing }] = await worker.em.fork().execute<{ missing: string }[]>(
    'select count(*) as missing from kb_chunks where file_id = ? and (embedding is null or embedding_dim <> ?)',
    [e2e.fileId, embedder.dimension],
  );
  if (Number(missing) !== 0) throw new Error(`${missing} passages without a vector after the pipeline runs`);

  const comparison = compareTargets(runs, 'kb-indexing embedding', 'pipeline embed', 'raw embedder', TARGET_RATIO, 'chunks/s');
  const { ratio, subjectRequestsPerSec: pipelineRate, baselineRequestsPerSec: rawRate } = comparison;
  const headline =
    `kb-indexing: ${s.pages}-page PDF in ${sec(totalMs)} s (${(s.pages / (totalMs / 1000)).toFixed(2)} pages/s, ${e2e.chunks} chunks); ` +
    `embedding pipeline ${pipelineRate.toFixed(1)} chunks/s / raw embedder ${rawRate.toFixed(1)} chunks/s = ratio ${ratio.toFixed(2)} (goal >= ${TARGET_RATIO}) ` +
    `${comparison.pass ? 'ok' : 'BELOW GOAL'}; in the end-to-end run the embed step did ${e2eEmbedRate.toFixed(1)} chunks/s`;

  return {
    section: 'kb-indexing',
    description: `A ${s.pages}-page PDF (${words} words) uploaded and indexed until active; then IndexingService.embed vs the embedder on the same texts`,
    settings: { ...s, warmupPages: WARMUP_PAGES, temporal: 'temporal server start-dev, SQLite file', order: 'per round raw / pipeline alternating; mean over rounds' },
    runs,
    targets: ['pipeline embed', 'raw embedder'].map((t) => summarizeTarget(runs, t)),
    comparisons: [comparison],
    headlines: [headline],
    details: { pdfBytes: pdf.length, words, chunks: e2e.chunks, endToEndSeconds: totalMs / 1000, stagesSeconds: Object.fromEntries(stages.map(([k, v]) => [k, round1(v) / 1000])), modelLoadSeconds: modelLoadMs / 1000 },
  };
}

export const benchKbIndexing = section(module, 'kb-indexing', measure);
