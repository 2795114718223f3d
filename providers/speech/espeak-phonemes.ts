/**
 * Text to IPA phonemes for Piper voices, as piper-phonemize makes them, from the espeak-ng
 * command-line program run as a separate process (never linked into this one: espeak-ng is
 * GPL-3, this project Apache-2.0; a program talked to over a pipe stays a separate work).
 *
 * - One espeak-ng process per phonemizer, kept alive: with no text argument it reads stdin
 *   line by line and answers each line's IPA (`-q --ipa`) at once, in 2-5 ms, where
 *   starting a process per clause costs ~30 ms here (docs/voice.md). Each clause goes as one
 *   line followed by a marker line (MARKER), whose known IPA ends the clause's answer
 *   (espeak may split a line into several clauses, one output line each). The text never
 *   goes in argv, SSML is off (no `-m`): a reply is read as text.
 * - piper-phonemize's rules: the text is cut into clauses at . ? ! , : ; (followed by a
 *   space or the end); each clause's phonemes are followed by its punctuation (and a space
 *   after , : ;); . ? ! end a sentence, and each sentence is synthesized on its own.
 * - Requests are served one at a time (a clause takes milliseconds); a process that dies is
 *   started again for the next request, the requests it held failing with
 *   SpeechSynthesisError.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { SpeechSynthesisError } from './tts';

/** A word espeak-ng does not know, spelled out to the same IPA every time: it ends each answer. */
const MARKER = 'qqqzzz';
/** The marker is taken out of the text, in any case (espeak-ng reads QQQZZZ alike). */
const MARKER_ANY_CASE = new RegExp(MARKER, 'gi');
/** espeak-ng reads at most 1000 bytes a line: longer clauses go in pieces cut at spaces. */
const MAX_LINE = 400;

export interface EspeakPhonemizerOptions {
  /** espeak-ng voice (the Piper voice's `espeak.voice`, e.g. `en-us`). */
  voice: string;
  /** The executable (default `espeak-ng` on PATH). */
  executable?: string;
}

/** One clause of the text: its words and the punctuation that ended it ('' for none). */
export interface Clause {
  text: string;
  punctuation: string;
}

/** The text cut as piper-phonemize cuts it: at . ? ! , : ; followed by white space or the end. */
export function splitClauses(text: string): Clause[] {
  const clean = text.replace(/\s+/g, ' ').trim();
  const out: Clause[] = [];
  const re = /([.?!,:;]+)(?=\s|$)/g;
  let last = 0;
  for (let m; (m = re.exec(clean)); ) {
    const words = clean.slice(last, m.index).trim();
    if (words) out.push({ text: words, punctuation: m[1] });
    else if (out.length) out[out.length - 1].punctuation ||= m[1];
    last = m.index + m[0].length;
  }
  const tail = clean.slice(last).trim();
  if (tail) out.push({ text: tail, punctuation: '' });
  return out;
}

/** The phoneme that stands for a clause's punctuation (piper-phonemize: the first mark decides). */
function punctuationPhonemes(punctuation: string): { phonemes: string; endsSentence: boolean } {
  for (const ch of punctuation) {
    if (ch === '.' || ch === '?' || ch === '!') return { phonemes: ch, endsSentence: true };
    if (ch === ',' || ch === ':' || ch === ';') return { phonemes: `${ch} `, endsSentence: false };
  }
  return { phonemes: '', endsSentence: false };
}

interface Pending {
  lines: string[];
  resolve: (lines: string[]) => void;
  reject: (err: unknown) => void;
}

export class EspeakPhonemizer {
  private child: ChildProcessWithoutNullStreams | null = null;
  private markerIpa: string | null = null;
  private readonly queue: Pending[] = [];
  private buffer = '';
  /** Serializes requests: one clause in flight at a time. */
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(private readonly opts: EspeakPhonemizerOptions) {}

  /** The text's phonemes, one string per sentence (the units Piper synthesizes). */
  async phonemize(text: string): Promise<string[]> {
    const sentences: string[] = [];
    let current = '';
    for (const clause of splitClauses(text)) {
      const pieces: string[] = [];
      for (const piece of cutLong(clause.text.replace(MARKER_ANY_CASE, ''))) pieces.push(...(await this.clause(piece)));
      const { phonemes, endsSentence } = punctuationPhonemes(clause.punctuation);
      current += pieces.filter(Boolean).join(' ') + phonemes;
      if (endsSentence) {
        if (current.trim()) sentences.push(current.trim());
        current = '';
      }
    }
    if (current.trim()) sentences.push(current.trim());
    return sentences;
  }

  /** Ends the espeak-ng process (a later request starts another). */
  close(): void {
    this.closed = true;
    this.child?.kill('SIGKILL');
    this.child = null;
  }

  /** One line's IPA lines (espeak answers one line per clause it finds). */
  private clause(line: string): Promise<string[]> {
    const run = this.chain.then(async () => {
      const child = await this.start();
      return new Promise<string[]>((resolve, reject) => {
        this.queue.push({ lines: [], resolve, reject });
        child.stdin.write(`${line}\n${MARKER}\n`);
      });
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async start(): Promise<ChildProcessWithoutNullStreams> {
    if (this.child && this.markerIpa !== null) return this.child;
    this.closed = false;
    const child = spawn(this.opts.executable ?? 'espeak-ng', ['-q', '--ipa', '-v', this.opts.voice], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.buffer = '';
    this.markerIpa = null;
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => (stderr = (stderr + d).slice(-1000)));
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => this.onData(d));
    child.stdin.on('error', () => undefined);
    const failed = (err: SpeechSynthesisError) => {
      if (this.child === child) this.child = null;
      for (const p of this.queue.splice(0)) p.reject(err);
    };
    child.on('error', (err: NodeJS.ErrnoException) =>
      failed(
        err.code === 'ENOENT'
          ? new SpeechSynthesisError('the Piper voice needs espeak-ng for its phonemes, which is not installed', false, { detail: err.message })
          : new SpeechSynthesisError('espeak-ng could not start', true, { detail: err.message }),
      ),
    );
    child.on('close', (code, signal) => {
      if (!this.closed || this.queue.length) failed(new SpeechSynthesisError('espeak-ng stopped', true, { detail: stderr.trim() || `exit ${code ?? signal}` }));
    });
    // The marker's own IPA first: what ends every later answer.
    const [ipa] = await new Promise<string[]>((resolve, reject) => {
      this.queue.push({ lines: [], resolve, reject });
      child.stdin.write(`${MARKER}\n`);
    });
    this.markerIpa = ipa;
    return child;
  }

  private onData(data: string): void {
    this.buffer += data;
    for (let nl; (nl = this.buffer.indexOf('\n')) >= 0; ) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      const head = this.queue[0];
      if (!head) continue;
      if (this.markerIpa === null) {
        // Starting: the marker's line alone.
        this.queue.shift();
        head.resolve([line]);
      } else if (line === this.markerIpa) {
        this.queue.shift();
        head.resolve(head.lines);
      } else head.lines.push(line);
    }
  }
}

/** A clause longer than espeak-ng's line, cut at spaces. */
function cutLong(text: string): string[] {
  if (text.length <= MAX_LINE) return [text];
  const out: string[] = [];
  let rest = text;
  while (rest.length > MAX_LINE) {
    let cut = rest.lastIndexOf(' ', MAX_LINE);
    if (cut <= 0) cut = MAX_LINE;
    out.push(rest.slice(0, cut));
    rest = rest.slice(cut).trimStart();
  }
  if (rest) out.push(rest);
  return out;
}
