// What this measures and how to read it: docs/benchmarks.md#kb-search
import { Client } from 'pg';
import type { WorkspaceVectors } from '../domain/kb/dense-index';
import { DEFAULT_LOCAL_MODEL, queryVector, type Embedder } from '../providers/embeddings/embedder';
import type { SearchQuery } from '../domain/kb/search';
import { newId } from '../lib/ids';
import { section, type Cleanup } from './lib/child';
import { envInt } from './lib/load';
import { benchCompose, benchEmbedder, setUpBench } from './lib/setup';
import { passage, prng, QUESTIONS, TOPICS } from '../dev/fakes/prose';
import { StoredQueryEmbedder, VectorCorpus, type StoredQuery as Query } from '../dev/fakes/vectors';
import { mean, ms, now, percentile, round1, sequentialRun, spread, summarizeTarget, timeEach } from './lib/stats';
import type { Result, TargetSummary } from './lib/types';

const DIM = 384;
const MODEL_ID = DEFAULT_LOCAL_MODEL;
const FILES_PER_STEP = 50;
const CLUSTERS = 256;
const ROWS_PER_INSERT = 500;
const WARMUP_QUERIES = 10;
const K = 10;

function settings() {
  const raw = process.env.BENCH_KB_SEARCH_SIZES ?? '10000,100000';
  const sizes = raw.split(',').map((s) => Number(s.trim()));
  if (!sizes.length || sizes.some((n) => !Number.isInteger(n) || n < FILES_PER_STEP) || sizes.some((n, i) => i > 0 && n <= sizes[i - 1])) {
    throw new Error(`BENCH_KB_SEARCH_SIZES=${raw}: expected ascending integers >= ${FILES_PER_STEP}`);
  }
  const [queries, cold, recall, embed] = [envInt('BENCH_KB_SEARCH_QUERIES', 200, 1), envInt('BENCH_KB_SEARCH_COLD', 3, 1), envInt('BENCH_KB_SEARCH_RECALL', 50, 1), envInt('BENCH_KB_SEARCH_EMBED', 50, 1)];
  return { sizes, queries, cold, recall, embed };
}

const took = (f: () => Promise<unknown>, t = now()) => f().then(() => now() - t);
const sizeLabel = (n: number) => (n % 1000 === 0 ? `${n / 1000}k` : String(n));
const mb = (bytes: number) => bytes / 1024 / 1024;

/** Adds passages until the workspace holds `target`: FILES_PER_STEP active files (the first in the folder), in one transaction, the GIN index rebuilt after. */
async function load(pg: Client, corpus: VectorCorpus, workspaceId: string, folderId: string, target: number, step: number, log: (line: string) => void): Promise<Record<string, number>> {
  const started = now();
  const add = target - corpus.size;
  const perFile = Math.floor(add / FILES_PER_STEP);
  const rand = prng(0xc0ffee + step);
  corpus.grow(add);
  await pg.query('begin');
  await pg.query('drop index if exists kb_chunks_tsv_idx');
  let textBytes = 0;
  for (let f = 0; f < FILES_PER_STEP; f++) {
    const chunks = f === FILES_PER_STEP - 1 ? add - perFile * (FILES_PER_STEP - 1) : perFile;
    const topic = TOPICS[(f + step) % TOPICS.length];
    const docId = newId('doc');
    const fileId = newId('file');
    const inFolder = f === 0;
    const name = `${topic.title} ${step}-${f}.pdf`;
    await pg.query('insert into kb_documents (id, workspace_id, folder_id, name) values ($1, $2, $3, $4)', [docId, workspaceId, inFolder ? folderId : null, name]);
    await pg.query(
      `insert into kb_files (id, workspace_id, document_id, version, is_current, name, status, mime_type, kind, file_size, sha256, chunk_count, index_dispatched_at)
       values ($1, $2, $3, 1, true, $4, 'active', 'application/pdf', 'pdf', $5, $6, $7, now())`,
      [fileId, workspaceId, docId, name, chunks * 1500, newId('psg').slice(4).padEnd(64, '0'), chunks],
    );
    for (let o = 0; o < chunks; o += ROWS_PER_INSERT) {
      const n = Math.min(ROWS_PER_INSERT, chunks - o);
      const params: unknown[] = [];
      const tuples: string[] = [];
      for (let r = 0; r < n; r++) {
        // Mostly the file's topic, sometimes another one: full text then matches across files.
        const t = rand() < 0.8 ? topic : TOPICS[Math.floor(rand() * TOPICS.length)];
        const text = passage(rand, t, 150 + Math.floor(rand() * 80)).join('\n\n');
        textBytes += text.length;
        const id = newId('psg');
        const v = corpus.add(id, inFolder, rand);
        const p = params.length;
        tuples.push(`($${p + 1}, $${p + 2}, $${p + 3}, $${p + 4}, $${p + 5}, $${p + 6}, 0, $${p + 7}, $${p + 8}, ${DIM})`);
        params.push(id, workspaceId, fileId, o + r, text, rand() < 0.5 ? t.title : null, Buffer.from(v.buffer, v.byteOffset, v.byteLength), MODEL_ID);
      }
      await pg.query(
        `insert into kb_chunks (id, workspace_id, file_id, ordinal, text, heading, char_start, embedding, embedding_model, embedding_dim) values ${tuples.join(', ')}`,
        params,
      );
    }
  }
  await pg.query(`create index kb_chunks_tsv_idx on kb_chunks using gin (tsv)`);
  await pg.query('commit');
  for (const table of ['kb_chunks', 'kb_files', 'kb_documents']) await pg.query(`vacuum analyze ${table}`);
  const figures = { passagesAdded: add, loadSeconds: round1((now() - started) / 1000), meanTextChars: Math.round(textBytes / add) };
  log(`  loaded ${add} passages (${figures.meanTextChars} chars each on average; GIN index and vacuum analyze included) in ${figures.loadSeconds} s`);
  return figures;
}

/** SearchService's two sides (private): timed apart, and the dense ranking for recall against the brute force. */
type Side = (workspaceId: string, q: SearchQuery, folders: Set<string> | null) => Promise<string[]>;
type Internals = { denseSearch: Side; fullText: (em: unknown, ...args: Parameters<Side>) => Promise<string[]> };

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);
  const { db, workspaceId } = bench;
  const pg = new Client({ connectionString: db.url });
  await pg.connect();
  cleanup.push(['pg client', () => pg.end()]);

  const corpus = new VectorCorpus(DIM, CLUSTERS);
  const queryRand = prng(0x9e3779b9);
  const queries: Query[] = Array.from({ length: Math.max(s.queries, s.recall) }, (_, i) => ({ text: QUESTIONS[i % QUESTIONS.length], vector: corpus.near(queryRand) }));

  // An API process's search, its query embedder the stored vectors (the real model at the end).
  const stored = new StoredQueryEmbedder(MODEL_ID, DIM);
  let embedder: Embedder = stored;
  const c = await benchCompose(bench, 'api', { overrides: { embedder: async () => embedder } });
  const dense = c.denseIndex;
  const search = c.services.search;
  const folder = await c.services.folders.create(workspaceId, 'Returns desk', null);
  const folders = new Set([folder.id]);
  const internals = search as unknown as Internals;
  const run = async (q: Query, inFolder: boolean) => {
    stored.next = q;
    const matches = await search.search(workspaceId, { query: q.text, top_k: K, ...(inFolder ? { folder_id: folder.id } : {}) });
    stored.next = null;
    return matches;
  };

  const targets: TargetSummary[] = [];
  const perSize: Record<string, unknown>[] = [];
  const headlines: string[] = [];
  for (const [step, size] of s.sizes.entries()) {
    const label = sizeLabel(size);
    log(`  ${label} passages:`);
    const loadFigures = await load(pg, corpus, workspaceId, folder.id, size, step, log);
    const folderShare = corpus.inFolder.filter(Boolean).length / corpus.size;

    // Cold: the matrix dropped (as a bare workspace NOTIFY drops it), then the load alone, then a whole search that loads it.
    const [coldLoads, coldSearches]: number[][] = [[], []];
    let vectors = null as WorkspaceVectors | null;
    const timed = async (into: number[], f: () => Promise<unknown>) => { dense.invalidate(workspaceId); into.push(await took(f)); };
    for (let i = 0; i < s.cold; i++) {
      await timed(coldLoads, async () => (vectors = await dense.vectors(workspaceId, MODEL_ID)));
      await timed(coldSearches, () => run(queries[i % queries.length], false));
    }
    if (!vectors || vectors.ids.length !== size || vectors.dim !== DIM) throw new Error(`DenseIndex loaded ${vectors?.ids.length} vectors of ${vectors?.dim} dims, expected ${size} of ${DIM}`);
    vectors = await dense.vectors(workspaceId, MODEL_ID); // the cached one, loaded by the last cold search

    // Warm: searches one after another, alternating no filter / folder filter (and which goes first).
    for (let i = 0; i < WARMUP_QUERIES; i++) await run(queries[i], i % 2 === 1);
    const [plain, filtered, dense1, dense2, fts1, fts2]: number[][] = [[], [], [], [], [], []];
    let matched = 0;
    const counts0 = { ...vectors.counts };
    for (let i = 0; i < s.queries; i++) {
      for (const withFolder of i % 2 === 0 ? [false, true] : [true, false]) {
        const t = now();
        const matches = await run(queries[i], withFolder);
        (withFolder ? filtered : plain).push(now() - t);
        matched += matches.length;
        if (withFolder && matches.some((m) => m.folder_id !== folder.id)) throw new Error('a folder-filtered search returned a passage from outside the folder');
        const [q, f] = [{ query: queries[i].text, top_k: K }, withFolder ? folders : null];
        stored.next = queries[i];
        (withFolder ? dense2 : dense1).push(await took(() => internals.denseSearch(workspaceId, q, f)));
        (withFolder ? fts2 : fts1).push(await took(() => internals.fullText(db.orm.em.fork(), workspaceId, q, f)));
        stored.next = null;
      }
    }
    if (matched === 0) throw new Error('searches returned no matches');

    // recall@10 of the dense side: SearchService's dense ranking against the bench's own brute force.
    const recall: Record<string, number[]> = { all: [], folder: [] };
    for (let i = 0; i < s.recall; i++) {
      const q = queries[i];
      for (const f of [false, true]) {
        stored.next = q;
        const got = (await internals.denseSearch(workspaceId, { query: q.text, top_k: K }, f ? folders : null)).slice(0, K);
        stored.next = null;
        const truth = new Set(corpus.bruteTopK(q.vector, K, f));
        recall[f ? 'folder' : 'all'].push(got.filter((id) => truth.has(id)).length / K);
      }
    }

    const [pl, fl, d1, d2, t1, t2] = [plain, filtered, dense1, dense2, fts1, fts2].map(spread);
    const int8Share = (vectors.counts.int8 - counts0.int8) / (vectors.counts.int8 - counts0.int8 + vectors.counts.float32 - counts0.float32);
    const bytesPer100k = (vectors.bytes() / size) * 100_000;
    const [coldMedian, loadMedian, recallAll, recallFolder] = [percentile(coldSearches, 50), percentile(coldLoads, 50), mean(recall.all), mean(recall.folder)];
    const line =
      `kb-search ${label}: p50 ${ms(pl.p50)} ms p99 ${ms(pl.p99)} ms (folder filter: p50 ${ms(fl.p50)} ms p99 ${ms(fl.p99)} ms); ` +
      `cold ${(coldMedian / 1000).toFixed(2)} s (matrix load ${(loadMedian / 1000).toFixed(2)} s); recall@10 ${recallAll.toFixed(3)} (folder ${recallFolder.toFixed(3)})`;
    log(`    ${line}`);
    log(`    apart: dense p50 ${ms(d1.p50)} ms p99 ${ms(d1.p99)} ms (folder p50 ${ms(d2.p50)} ms p99 ${ms(d2.p99)} ms), ${(int8Share * 100).toFixed(0)}% decided by the int8 pass; full text p50 ${ms(t1.p50)} ms p99 ${ms(t1.p99)} ms (folder p50 ${ms(t2.p50)} ms p99 ${ms(t2.p99)} ms)`);
    log(`    matrices + ids ${mb(bytesPer100k).toFixed(1)} MB per 100k passages, process RSS ${mb(process.memoryUsage().rss).toFixed(0)} MB; folder holds ${(folderShare * 100).toFixed(1)}% of passages`);
    headlines.push(line);
    for (const [target, xs] of [[`search ${label}`, plain], [`search ${label} folder`, filtered]] as const) {
      targets.push(summarizeTarget([sequentialRun(target, xs, {}, 1)], target));
    }
    perSize.push({ size, load: loadFigures, coldSearchMs: coldSearches, coldMatrixLoadMs: coldLoads, warmMs: { all: pl, folder: fl, denseAll: d1, denseFolder: d2, fullTextAll: t1, fullTextFolder: t2 }, int8Share, bytesPer100k, recallAt10: { all: recallAll, folder: recallFolder } });
  }

  // The real model: each query text on its own (as a search embeds it), then the whole search at the largest size with it.
  const real = benchEmbedder(bench);
  const t = now();
  await queryVector(real, 'warm-up query');
  const modelLoadMs = now() - t;
  embedder = real;
  const question = (i: number) => QUESTIONS[i % QUESTIONS.length];
  const embedMs = await timeEach(s.embed, (i) => queryVector(real, question(i)));
  const fullMs = await timeEach(s.embed, (i) => search.search(workspaceId, { query: question(i), top_k: K }));
  const largest = sizeLabel(s.sizes[s.sizes.length - 1]);
  const embedLine =
    `kb-search query embedding: p50 ${ms(percentile(embedMs, 50))} ms p99 ${ms(percentile(embedMs, 99))} ms (model load ${(modelLoadMs / 1000).toFixed(2)} s); ` +
    `search ${largest} with real query embedding p50 ${ms(percentile(fullMs, 50))} ms p99 ${ms(percentile(fullMs, 99))} ms`;
  headlines.push(embedLine);

  return {
    section: 'kb-search',
    description: `SearchService.search on ${s.sizes.map(sizeLabel).join(' / ')} synthetic passages (2% in one folder); latency excludes query embedding, reported apart`,
    settings: { ...s, dim: DIM, clusters: CLUSTERS, filesPerStep: FILES_PER_STEP, topK: K, order: 'sequential searches, no filter / folder filter alternating' },
    targets,
    headlines,
    details: { sizes: perSize, queryEmbeddingMs: spread(embedMs), modelLoadMs, searchWithRealEmbeddingMs: spread(fullMs) },
  };
}

export const benchKbSearch = section(module, 'kb-search', measure);
