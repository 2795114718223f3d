import type OpenAI from 'openai';
import { classifyOpenAiError, openAiBaseUrl, openAiClient, withDeadline } from '../llm/openai';
import fs from 'node:fs';
import { MEDIA_EXTENSIONS, TranscriberError, type Transcriber } from '../../lib/extract';

/**
 * OpenAI-compatible speech-to-text: POST {baseUrl}/v1/audio/transcriptions as multipart
 * (file, model), reading `{ text }`, through the shared SDK client (providers/llm/openai).
 * `baseUrl` may or may not already end in /v1. The file is streamed from disk; video
 * containers (mp4/webm) are sent as they are, which OpenAI's endpoint and
 * whisper-compatible servers accept (OpenAI caps uploads at 25 MB). A failure is an
 * ExtractionError that says, by the shared classifier, whether trying again can help.
 */
export class OpenAiTranscriber implements Transcriber {
  private readonly client: OpenAI;

  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly model: string,
    private readonly requestTimeoutMs = 600_000,
  ) {
    this.client = openAiClient({ baseUrl, apiKey: apiKey || undefined, timeoutMs: requestTimeoutMs });
  }

  get endpoint(): string {
    return `${openAiBaseUrl(this.baseUrl)}/audio/transcriptions`;
  }

  async transcribe(filePath: string, mime: string): Promise<string> {
    // A File over a file-backed Blob: the SDK's multipart body reads it from disk as it is sent.
    return this.send(new File([await fs.openAsBlob(filePath, { type: mime })], `upload.${MEDIA_EXTENSIONS[mime] ?? 'bin'}`, { type: mime }));
  }

  /**
   * Audio already in memory (a voice call's turn as WAV). `signal` (barge-in, hang-up)
   * aborts the request; the rejection is then the signal's reason, not a TranscriberError.
   */
  transcribeBytes(bytes: Uint8Array, mime: string, options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.send(new File([bytes], `upload.${MEDIA_EXTENSIONS[mime] ?? 'bin'}`, { type: mime }), options.signal);
  }

  private async send(file: File, caller?: AbortSignal): Promise<string> {
    if (caller?.aborted) throw caller.reason;
    let answer: unknown;
    try {
      answer = await withDeadline(this.requestTimeoutMs, (signal) =>
        this.client.audio.transcriptions.create({ file, model: this.model, response_format: 'json' }, { signal: caller ? AbortSignal.any([signal, caller]) : signal }),
      );
    } catch (err) {
      if (caller?.aborted) throw caller.reason;
      const f = classifyOpenAiError(err, this.apiKey);
      const why = f.kind === 'status' ? `HTTP ${f.status}` : f.kind === 'timeout' ? 'no answer in time' : f.kind === 'malformed' ? 'the server did not answer JSON' : 'the server could not be reached';
      throw new TranscriberError(`transcription failed (${why})`, f.detail || undefined, f.kind === 'status' && (f.status === 401 || f.status === 403), f.retryable);
    }
    // The SDK hands back the text of an answer that is not JSON.
    if (typeof answer === 'string') throw new TranscriberError('transcription failed (the server did not answer JSON)', answer.slice(0, 500));
    const text = (answer as { text?: unknown } | null)?.text;
    if (typeof text !== 'string') throw new TranscriberError('transcription failed (no text in the answer)', JSON.stringify(answer)?.slice(0, 500));
    return text;
  }
}
