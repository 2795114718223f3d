/**
 * Document text extraction for the knowledge base.
 *
 * Isolation: every document is parsed in a separate, short-lived Node process
 * (`child_process.fork` of child.ts) started with `--max-old-space-size=<maxMemoryMb>`
 * and a minimal environment (no secrets). The parent
 *   - kills it (SIGKILL) when `timeoutMs` passes → "extraction exceeded N s";
 *   - watches its resident memory (Linux /proc) and kills it past maxMemoryMb + 512 MB,
 *     which catches what the V8 heap limit does not see (Buffers, the OCR WASM heap);
 *   - turns a V8 heap OOM (abort with "heap out of memory"), the watchdog kill or a kernel
 *     OOM kill into "extraction exceeded its memory limit".
 * A hung or exploding parser therefore fails that one file and nothing else. A process,
 * not a worker thread: a worker's resourceLimits bound only its V8 heap, an OOM in a
 * worker has crashed whole processes in some Node versions, and a blocked native or WASM
 * call cannot be interrupted from the outside, whereas a process can always be killed.
 *
 * Audio and video are transcribed in the parent through the injected Transcriber: an
 * HTTP call, or the embedded whisper.cpp (whisper.ts), which runs in a worker thread of
 * its own with its own limits (one at a time, a longest recording, a deadline).
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  DEFAULT_CHILD_LIMITS, ExtractionError, NoTextExtracted, TranscriberError,
  MediaTooLong, type ChildJob, type ChildLimits, type ChildReply, type DocKind, type ExtractResult, type Segment,
} from './types';
import { tidyText } from './sections';
import { probeDurationSeconds } from './probe';

export { ExtractionError, MediaTooLong, MEDIA_TOO_LONG, NoTextExtracted, TranscriberError } from './types';
export type { DocKind, ExtractResult, Segment } from './types';
export { sniffType, sniffBuffer, type SniffResult } from './sniff';
export { probeDurationSeconds } from './probe';

export interface Transcriber {
  /**
   * `signal`: the caller gave up (a cancelled activity, the extraction's time limit): stop if possible.
   * `maxSeconds`: a lower cap than the transcriber's own for this recording (anonymous work), where it decodes.
   */
  transcribe(filePath: string, mime: string, options?: { signal?: AbortSignal; maxSeconds?: number }): Promise<string>;
  /**
   * It limits its own time (the embedded transcriber: from the recording's length, waiting
   * for its turn not counted); the extraction's time limit is then not applied on top.
   */
  readonly enforcesOwnTimeLimit?: boolean;
}

export interface ExtractInput {
  filePath: string;
  kind: DocKind;
  mime: string;
  fileName: string;
}

export interface ExtractOptions {
  /** Wall-clock limit for one document (default 120 000 ms). */
  timeoutMs?: number;
  /** V8 heap limit of the extraction process (default 512 MB). */
  maxMemoryMb?: number;
  /** Needed for audio and video; null/undefined → those fail with a clear reason. */
  transcriber?: Transcriber | null;
  /** Directory holding eng.traineddata(.gz); default: @tesseract.js-data/eng's 4.0.0_best_int. */
  ocrLangPath?: string;
  /** Aborting (e.g. a cancelled Temporal activity) kills the extraction process. */
  signal?: AbortSignal;
  /** Limits of the extraction process other than the defaults (DEFAULT_CHILD_LIMITS), e.g. widget uploads' page cap. */
  limits?: Partial<ChildLimits>;
  /** Longest audio or video taken, in seconds: a longer one (by its container's header) is MediaTooLong before it is transcribed. */
  maxMediaSeconds?: number;
}

export const DEFAULT_TIMEOUT_MS = 120_000;
export const DEFAULT_MAX_MEMORY_MB = 512;
/** Resident-memory headroom over the heap limit before the watchdog kills the child. */
const RSS_HEADROOM_MB = 512;
const RSS_POLL_MS = 150;

export function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return `${s >= 10 ? Math.round(s) : Number(s.toFixed(2))} s`;
}

export async function extractDocument(input: ExtractInput, opts: ExtractOptions = {}): Promise<ExtractResult> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxMemoryMb = opts.maxMemoryMb ?? DEFAULT_MAX_MEMORY_MB;
  let result: ExtractResult;
  if (input.kind === 'audio' || input.kind === 'video') {
    result = await transcribeMedia(input, opts.transcriber ?? null, timeoutMs, opts.signal, opts.maxMediaSeconds);
  } else {
    result = await runChild({
      filePath: path.resolve(input.filePath),
      kind: input.kind,
      mime: input.mime,
      fileName: input.fileName,
      ocrLangPath: opts.ocrLangPath,
      limits: { ...DEFAULT_CHILD_LIMITS, ...opts.limits },
    }, timeoutMs, maxMemoryMb, opts.signal);
  }
  const segments: Segment[] = [];
  for (const s of result.segments) {
    const text = tidyText(s.text);
    if (text) segments.push({ ...s, text });
  }
  if (!segments.length) throw new NoTextExtracted('no text could be extracted', result.warnings.join('; ') || undefined);
  return { segments, warnings: result.warnings };
}

// ---------------------------------------------------------------------------------------
// The child process

function childEntry(): { file: string; execArgv: string[] } {
  // Under tsx (production) and Jest this file is .ts and the child needs tsx's loader;
  // a compiled build would have child.js next to index.js and need nothing.
  const ext = path.extname(__filename);
  const file = path.join(__dirname, `child${ext}`);
  if (ext !== '.ts') return { file, execArgv: [] };
  // tsx's CommonJS hook only (this package is CommonJS): ESM dependencies such as
  // pdfjs-dist then load through Node's own loader, untransformed, which is ~0.5 s faster
  // per child than `--import tsx`.
  return { file, execArgv: ['--require', require.resolve('tsx/cjs')] };
}

/** Only what Node needs: the child parses untrusted files and gets no secrets. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['PATH', 'TMPDIR', 'TMP', 'TEMP', 'LANG', 'LC_ALL', 'TZ', 'NODE_ENV', 'SYSTEMROOT']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  return env;
}

function readRssMb(pid: number): Promise<number | null> {
  return new Promise((resolve) => {
    fs.readFile(`/proc/${pid}/status`, 'utf8', (err, text) => {
      if (err) return resolve(null);
      const m = /VmRSS:\s+(\d+)\s+kB/.exec(text);
      resolve(m ? Number(m[1]) / 1024 : null);
    });
  });
}

const MEMORY_REASON = 'extraction exceeded its memory limit';

function runChild(job: ChildJob, timeoutMs: number, maxMemoryMb: number, signal?: AbortSignal): Promise<ExtractResult> {
  if (signal?.aborted) return Promise.reject(new ExtractionError('extraction was cancelled'));
  const { file, execArgv } = childEntry();
  return new Promise<ExtractResult>((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = fork(file, [JSON.stringify(job)], {
        execArgv: [...execArgv, `--max-old-space-size=${Math.max(32, Math.floor(maxMemoryMb))}`],
        env: childEnv(),
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
        serialization: 'advanced',
      });
    } catch (err) {
      reject(new ExtractionError('extraction could not start', String(err), true));
      return;
    }
    let reply: ChildReply | undefined;
    let killedFor: string | undefined;
    /** Killed for a reason that says nothing about the document (it never started): a retry may succeed. */
    let killedRetryable = false;
    let stderr = '';
    let settled = false;
    const kill = (reason: string, retryable = false) => {
      if (killedFor || child.exitCode !== null || child.signalCode !== null) return;
      killedFor = reason;
      killedRetryable = retryable;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => kill(`extraction exceeded ${formatSeconds(timeoutMs)}`), timeoutMs);
    const rssLimit = maxMemoryMb + RSS_HEADROOM_MB;
    let polling = false;
    const watchdog = setInterval(() => {
      if (polling || child.pid === undefined) return;
      polling = true;
      void readRssMb(child.pid).then((rss) => {
        polling = false;
        if (rss !== null && rss > rssLimit) kill(MEMORY_REASON);
      });
    }, RSS_POLL_MS);
    const onAbort = () => kill('extraction was cancelled');
    signal?.addEventListener('abort', onAbort, { once: true });

    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearInterval(watchdog);
      signal?.removeEventListener('abort', onAbort);
      fn();
    };

    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => {
      stderr = (stderr + d).slice(-16_384);
    });
    child.on('message', (msg: ChildReply) => {
      reply ??= msg;
    });
    child.on('error', (err) => {
      kill('extraction could not start', true);
      finish(() => reject(new ExtractionError('extraction could not start', err.message, true)));
    });
    child.on('exit', (code, sig) => {
      finish(() => {
        // A reply that made it out counts, even if the child was killed while exiting.
        if (reply) {
          if (reply.ok) return resolve({ segments: reply.segments, warnings: reply.warnings });
          return reject(new ExtractionError(reply.reason, reply.detail, reply.retryable));
        }
        if (killedFor) return reject(new ExtractionError(killedFor, stderr.trim() || undefined, killedRetryable));
        if (/heap out of memory|Reached heap limit|Allocation failed|out of memory/i.test(stderr) || sig === 'SIGKILL' || sig === 'SIGABRT' || code === 134) {
          return reject(new ExtractionError(MEMORY_REASON, stderr.trim() || `exit ${code ?? sig}`));
        }
        reject(new ExtractionError('extraction process crashed', `exit code ${code} signal ${sig}: ${stderr.trim()}`, true));
      });
    });
  });
}

// ---------------------------------------------------------------------------------------
// Audio and video

async function transcribeMedia(input: ExtractInput, transcriber: Transcriber | null, timeoutMs: number, signal?: AbortSignal, maxSeconds?: number): Promise<ExtractResult> {
  const what = input.kind === 'video' ? 'video' : 'audio';
  if (!transcriber) throw new ExtractionError(`${what} needs a transcriber: set TRANSCRIBE_BASE_URL, or run npm run models:fetch for the embedded one`);
  if (maxSeconds !== undefined) {
    // The header's length, before the transcriber's queue: a long recording costs no transcription at all.
    const seconds = await probeDurationSeconds(input.filePath);
    if (seconds !== null && seconds > maxSeconds) throw new MediaTooLong(maxSeconds);
  }
  // The transcriber is told to stop when the caller gives up or the time limit passes.
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    if (transcriber.enforcesOwnTimeLimit) return;
    timer = setTimeout(() => {
      stop.abort();
      reject(new TranscriberError(`transcription exceeded ${formatSeconds(timeoutMs)}`));
    }, timeoutMs);
  });
  const aborted = new Promise<never>((_, reject) => {
    signal?.addEventListener('abort', () => {
      stop.abort();
      reject(new ExtractionError('extraction was cancelled'));
    }, { once: true });
  });
  try {
    const text = await Promise.race([transcriber.transcribe(input.filePath, input.mime, { signal: stop.signal, maxSeconds }), timeout, aborted]);
    return { segments: [{ text }], warnings: [] };
  } catch (err) {
    if (err instanceof ExtractionError) throw err;
    // The service could not be reached or broke off: its failure, not the file's.
    throw new TranscriberError(`${what} transcription failed`, err instanceof Error ? err.message : String(err));
  } finally {
    clearTimeout(timer);
  }
}

/** File extensions a transcription server expects, by MIME type (it tells formats by the name). */
export const MEDIA_EXTENSIONS: Record<string, string> = {
  'audio/mpeg': 'mp3', 'audio/wav': 'wav', 'audio/ogg': 'ogg', 'audio/opus': 'ogg', 'audio/x-m4a': 'm4a', 'audio/mp4': 'm4a', 'audio/webm': 'webm',
  'video/mp4': 'mp4', 'video/webm': 'webm',
};

