import fs from 'node:fs';
import { whisperModelPath, type Config } from '../config';
import { extractDocument, LocalWhisperTranscriber, OpenAiTranscriber, type DocKind, type Transcriber } from './extract';
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

/**
 * The process's speech-to-text: the OpenAI-compatible endpoint when TRANSCRIBE_BASE_URL is
 * set, else the embedded whisper.cpp when its model file is there (npm run models:fetch),
 * else none (null: audio and video uploads answer 503, audio knowledge-base files end in
 * error). The embedded one loads its model on first use: the API process, which never
 * transcribes (voice notes and uploads are transcribed by the worker), loads nothing.
 */
export function transcriberFromConfig(config: Config): Transcriber | null {
  if (config.TRANSCRIBE_BASE_URL) return new OpenAiTranscriber(config.TRANSCRIBE_BASE_URL, config.TRANSCRIBE_API_KEY ?? '', config.TRANSCRIBE_MODEL);
  const modelPath = whisperModelPath(config);
  if (!fs.existsSync(modelPath)) return null;
  return new LocalWhisperTranscriber({
    modelPath,
    maxSeconds: config.TRANSCRIBE_MAX_SECONDS,
    threads: config.TRANSCRIBE_THREADS,
    language: config.TRANSCRIBE_LANGUAGE,
  });
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
