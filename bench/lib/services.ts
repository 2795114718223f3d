import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ExtractFn } from '../../core/kb/indexing';
import type { ServiceOptions } from '../../core/services';
import { LocalBlobStore } from '../../core/storage/blob-store';

const unused = (what: string) => () => Promise.reject(new Error(`${what} is not used by this benchmark`));

/**
 * The knowledge-base parts of ServiceOptions for sections that never touch the knowledge
 * base: a blob store in a temporary directory and an embedder that refuses to load.
 * `extract` is the same for an IndexingService the worker needs but never runs.
 */
export function unusedKbOptions(parentDir = os.tmpdir()): { options: Pick<ServiceOptions, 'blobs' | 'embedder'>; extract: ExtractFn; cleanup: () => Promise<void> } {
  const dir = fs.mkdtempSync(path.join(parentDir, 'concierge-bench-blobs-'));
  return {
    options: { blobs: new LocalBlobStore(dir), embedder: unused('the embedder') },
    extract: unused('file extraction'),
    cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/** The embedding model's directory: BENCH_KB_MODELS_DIR, else CONCIERGE_MODELS_DIR, else .data/models (npm run models:fetch). */
export function benchModelsDir(): string {
  return path.resolve(process.env.BENCH_KB_MODELS_DIR || process.env.CONCIERGE_MODELS_DIR || path.join(__dirname, '..', '..', '.data', 'models'));
}
