// What this measures and how to read it: docs/benchmarks.md#kb-upload-rss
import fs from 'node:fs';
import path from 'node:path';
import { startApi } from '../api/server';
import { uploadOrderExport as upload } from '../dev/fakes/uploads';
import { compose } from '../app/compose';
import { loadConfig, rateLimitStoreKind } from '../app/config';
import { forkRole, section, serveRole, type Cleanup } from './lib/child';
import { envInt } from './lib/load';
import { BENCH_KEY, benchCompose, createKey, listen, setUpBench } from './lib/setup';
import { below, procMemory, resetHwm } from './lib/stats';
import type { Result } from './lib/types';

const GOAL_MB = 64;
const SAMPLE_MS = 50;
const WARMUP_BYTES = 4 * 1024 * 1024;
const toMb = (bytes: number) => bytes / 1024 / 1024;

type Usage = ReturnType<typeof process.memoryUsage>;

/** The API process (ready: its URL); asked, it reports its memory after full collections. */
const server = () =>
  serveRole<'baseline', Usage>(async () => {
    const config = loadConfig();
    const c = await compose(config, { role: 'api', databaseUrl: config.DATABASE_URL!, embedded: false });
    const { app } = await startApi(c, { rateStore: rateLimitStoreKind(config, 'postgres') });
    const handle = async () => {
      for (let i = 0; i < 3; i++) {
        (globalThis as { gc?: () => void }).gc?.();
        await new Promise((r) => setTimeout(r, 100));
      }
      return process.memoryUsage();
    };
    return { ready: await listen(app), handle, stop: () => c.close() };
  });

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const bytes = envInt('BENCH_KB_UPLOAD_BYTES', 200_000_000, 1024);
  const bench = await setUpBench(cleanup);
  const key = (await createKey((await benchCompose(bench, 'cli')).services, bench.workspaceId, ['kb:read', 'kb:write'])).key;
  const storage = path.join(bench.dir, 'api-blobs');
  const env = { NODE_ENV: 'production', DATABASE_URL: bench.db.url, CONCIERGE_ENCRYPTION_KEY: BENCH_KEY, CONCIERGE_DATA_DIR: bench.dir, CONCIERGE_STORAGE_DIR: storage, LOG_LEVEL: 'warn', RATE_LIMIT_STORE: 'postgres' };
  const api = await forkRole<'baseline', Usage, string>(__filename, 'server', cleanup, env, ['--expose-gc']);
  const { pid, ready: url } = api;
  const limit = loadConfig(process.env).KB_UPLOAD_MAX_BYTES;
  if (bytes > limit) throw new Error(`BENCH_KB_UPLOAD_BYTES=${bytes} is over the API's upload limit (${limit} bytes)`);
  const del = async (id: string) => (await fetch(`${url}/api/v1/kb/files/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } })).status;

  const warm = await upload(url, key, 'warm-up.csv', WARMUP_BYTES);
  if (warm.status !== 201 || !warm.body.id || (await del(warm.body.id)) !== 204) throw new Error(`warm-up upload answered ${warm.status}: ${JSON.stringify(warm.body)}`);

  // ---- Baseline after a full collection, then the big upload with the server's RSS sampled.
  const baseline = await api.call('baseline');
  await new Promise((r) => setTimeout(r, 300));
  const hwmReset = await resetHwm(pid);
  const baselineRss = procMemory(pid)?.rss ?? baseline.rss;
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(procMemory(pid)?.rss ?? 0), SAMPLE_MS);
  const outcome = await upload(url, key, 'orders-export.csv', bytes).finally(() => clearInterval(sampler));
  const after = procMemory(pid);
  if (outcome.status !== 201 || !outcome.body.id) throw new Error(`the upload answered ${outcome.status}: ${JSON.stringify(outcome.body)}`);
  if (outcome.body.file_size !== bytes || outcome.body.mime_type !== 'text/csv') throw new Error(`the API recorded ${outcome.body.file_size} bytes of ${outcome.body.mime_type}, sent ${bytes} of text/csv`);

  // ---- The stored blob has every byte; deleting the file removes it.
  const stored = (fs.readdirSync(path.join(storage, 'blobs'), { recursive: true, withFileTypes: true }) as fs.Dirent[]).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
  if (stored.length !== 1 || fs.statSync(stored[0]).size !== bytes) throw new Error(`expected one stored blob of ${bytes} bytes, found ${stored.length}`);
  if ((await del(outcome.body.id)) !== 204 || fs.existsSync(stored[0])) throw new Error('deleting the uploaded file did not remove its blob');
  if (fs.readdirSync(path.join(storage, 'tmp')).length) throw new Error('staging files left behind in the blob store');

  const sampledPeak = Math.max(baselineRss, ...samples);
  const peakRss = Math.max(sampledPeak, hwmReset && after ? after.hwm : 0);
  const growth = toMb(peakRss - baselineRss);
  const check = below('kb-upload-rss growth', growth, 'MB', GOAL_MB);
  const headline =
    `kb-upload-rss: ${(bytes / 1e6).toFixed(0)} MB streamed in ${outcome.seconds.toFixed(1)} s (${(bytes / 1e6 / outcome.seconds).toFixed(0)} MB/s), ` +
    `RSS ${toMb(baselineRss).toFixed(0)} -> peak ${toMb(peakRss).toFixed(0)} MB = +${growth.toFixed(1)} MB (goal < ${GOAL_MB} MB) ${check.pass ? 'ok' : 'MISSED'}`;
  log(`    peak from ${samples.length} samples: ${toMb(sampledPeak).toFixed(0)} MB; kernel high-water mark: ${hwmReset && after ? `${toMb(after.hwm).toFixed(0)} MB` : 'unavailable'}`);
  log(`    verified: 201 text/csv with file_size ${bytes}; one blob of ${bytes} bytes stored, removed by DELETE (204); no staging files left`);
  return {
    section: 'kb-upload-rss',
    description: `RSS growth of an API process (compose + startApi, as api/main.ts runs it) while it receives one ${(bytes / 1e6).toFixed(0)} MB multipart upload streamed from another process`,
    settings: { bytes, sampleMs: SAMPLE_MS, warmupBytes: WARMUP_BYTES, goalMb: GOAL_MB, rateStore: 'postgres', apiUploadLimitBytes: limit },
    checks: [check],
    headlines: [headline],
    details: { uploadSeconds: outcome.seconds, baselineRssMb: toMb(baselineRss), peakRssMb: toMb(peakRss), sampledPeakRssMb: toMb(sampledPeak) },
  };
}

export const benchKbUploadRss = section(module, 'kb-upload-rss', measure, { roles: { server } });
