import type { Config } from '../config';
import { extractDocument, OpenAiTranscriber, type DocKind, type Transcriber } from './extract';
import type { ExtractFn } from './indexing';

export interface ExtractorSettings {
  timeoutMs: number;
  maxMemoryMb: number;
  transcriber: Transcriber | null;
  /** Extraction processes running at once in this worker; each can use maxMemoryMb. */
  concurrency?: number;
}

/** A counting semaphore: at most `n` calls of the wrapped function run at once, the rest queue. */
function limitConcurrency<A extends unknown[], R>(n: number, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  let active = 0;
  const queue: Array<() => void> = [];
  return async (...args: A) => {
    if (active >= n) await new Promise<void>((resolve) => queue.push(resolve));
    active++;
    try {
      return await fn(...args);
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}

/**
 * The extraction step of indexing: the isolated extractors with their limits and the
 * configured transcriber. Child processes are capped per worker (default 2, one per
 * core here) so a burst of uploads queues instead of exhausting memory.
 */
export function createExtractor(s: ExtractorSettings): ExtractFn {
  return limitConcurrency(s.concurrency ?? 2, (input: Parameters<ExtractFn>[0]) =>
    extractDocument(
      { filePath: input.filePath, kind: input.kind as DocKind, mime: input.mime, fileName: input.fileName },
      { timeoutMs: s.timeoutMs, maxMemoryMb: s.maxMemoryMb, transcriber: s.transcriber },
    ),
  );
}

/** The configured speech-to-text endpoint; null when TRANSCRIBE_BASE_URL is unset. */
export function transcriberFromConfig(config: Config): Transcriber | null {
  return config.TRANSCRIBE_BASE_URL ? new OpenAiTranscriber(config.TRANSCRIBE_BASE_URL, config.TRANSCRIBE_API_KEY ?? '', config.TRANSCRIBE_MODEL) : null;
}

/** The process's extraction pool: its limits from the config; `transcriber` for audio and video (see transcriberFromConfig). */
export function extractorFromConfig(config: Config, transcriber: Transcriber | null): ExtractFn {
  return createExtractor({
    timeoutMs: config.EXTRACT_TIMEOUT_MS,
    maxMemoryMb: config.EXTRACT_MAX_MEMORY_MB,
    transcriber,
    concurrency: config.EXTRACT_CONCURRENCY,
  });
}
