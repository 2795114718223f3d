import fs from 'node:fs';
import { whisperModelPath, type Config } from './config';
import { extractDocument, type DocKind, type Transcriber } from '../lib/extract';
import { LocalWhisperTranscriber } from '../providers/speech/whisper';
import { OpenAiTranscriber } from '../providers/speech/openai-transcriber';
import { FairPool } from '../lib/fair-pool';
import type { ExtractFn } from '../domain/kb/indexing';

export interface ExtractorSettings {
  timeoutMs: number;
  maxMemoryMb: number;
  transcriber: Transcriber | null;
  /** Extraction processes running at once in this worker; each can use maxMemoryMb. */
  concurrency?: number;
  /** Of those, how many anonymous jobs (widget uploads) may hold at once (default 1). */
  anonymousSlots?: number;
  /** The pool to run in (shared with voice notes: poolFromConfig); default: one of its own from the two above. */
  pool?: FairPool;
  /** Anonymous jobs' own limits: a PDF's page count (UPLOAD_MAX_PDF_PAGES) and a recording's length (WIDGET_TRANSCRIBE_MAX_SECONDS). */
  anonymous?: { maxPdfPages?: number; maxMediaSeconds?: number };
}

/**
 * The extraction step of indexing: the isolated extractors with their limits and the
 * configured transcriber. Child processes are capped per worker (default 2, one per
 * core here) so a burst of uploads queues instead of exhausting memory; the queue is
 * fair across workspaces and anonymous work has a lane of its own (FairPool), so one
 * workspace's burst, or anyone's widget uploads, cannot starve another workspace.
 */
export function createExtractor(s: ExtractorSettings): ExtractFn {
  const pool = s.pool ?? new FairPool(s.concurrency ?? 2, s.anonymousSlots ?? 1);
  return (input: Parameters<ExtractFn>[0]) =>
    pool.run(input.owner, () => {
      const anonymous = input.owner?.anonymous ? s.anonymous : undefined;
      return extractDocument(
        { filePath: input.filePath, kind: input.kind as DocKind, mime: input.mime, fileName: input.fileName },
        {
          timeoutMs: s.timeoutMs,
          maxMemoryMb: s.maxMemoryMb,
          transcriber: s.transcriber,
          limits: anonymous?.maxPdfPages ? { maxPdfPages: anonymous.maxPdfPages } : undefined,
          maxMediaSeconds: anonymous?.maxMediaSeconds,
        },
      );
    });
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
export function extractorFromConfig(config: Config, transcriber: Transcriber | null, pool?: FairPool): ExtractFn {
  return createExtractor({
    pool,
    timeoutMs: config.EXTRACT_TIMEOUT_MS,
    maxMemoryMb: config.EXTRACT_MAX_MEMORY_MB,
    transcriber,
    concurrency: config.EXTRACT_CONCURRENCY,
    anonymousSlots: config.EXTRACT_ANONYMOUS_SLOTS,
    anonymous: { maxPdfPages: config.UPLOAD_MAX_PDF_PAGES, maxMediaSeconds: widgetMediaMaxSeconds(config) },
  });
}

/** The longest recording taken from a widget visitor: WIDGET_TRANSCRIBE_MAX_SECONDS, never more than TRANSCRIBE_MAX_SECONDS. */
export function widgetMediaMaxSeconds(config: Pick<Config, 'WIDGET_TRANSCRIBE_MAX_SECONDS' | 'TRANSCRIBE_MAX_SECONDS'>): number {
  return Math.min(config.WIDGET_TRANSCRIBE_MAX_SECONDS, config.TRANSCRIBE_MAX_SECONDS);
}

/**
 * The process's work pool (EXTRACT_CONCURRENCY slots, EXTRACT_ANONYMOUS_SLOTS of them for
 * anonymous work): extraction runs in it, and widget voice notes take their turn in its
 * anonymous lane, so a burst of them waits by workspace instead of first come first served.
 */
export function poolFromConfig(config: Pick<Config, 'EXTRACT_CONCURRENCY' | 'EXTRACT_ANONYMOUS_SLOTS'>): FairPool {
  return new FairPool(config.EXTRACT_CONCURRENCY, config.EXTRACT_ANONYMOUS_SLOTS);
}
