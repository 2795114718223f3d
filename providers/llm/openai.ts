import { redactSecret } from '../../lib/crypto/redact';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, OpenAIError } from 'openai';
import type { ListedModel } from '../../domain/ports/llm';

export type { ListedModel };

/**
 * The one place that talks to OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, Ollama,
 * LiteLLM, whisper servers, ...) for chat, embeddings and transcription: it builds the
 * `openai` SDK's clients and classifies everything they throw.
 *
 * Clients never retry (`maxRetries: 0`): the callers run inside Temporal activities, whose
 * retry policy owns retries, and SDK retries would multiply with it. The classification
 * below tells the caller whether a retry can help; see `withRetries` for the one caller
 * that also retries in process.
 */

export interface OpenAiEndpoint {
  /** Server root, with or without a trailing `/v1`. */
  baseUrl: string;
  /** Sent as a bearer token; none (or empty) sends no Authorization header, for local servers. */
  apiKey?: string;
  /** The SDK's deadline for a response's headers. */
  timeoutMs: number;
  /** Replaces the SDK's fetch (a connection pinned to checked addresses: lib/net/pinned-fetch.ts). */
  fetch?: typeof fetch;
}

/** `{root}/v1`, whether baseUrl ends in `/v1` (or a slash) or not: the SDK's baseURL. */
export function openAiBaseUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1`;
}

export function openAiClient(e: OpenAiEndpoint): OpenAI {
  return new OpenAI({
    baseURL: openAiBaseUrl(e.baseUrl),
    // The SDK insists on a key; without one it falls back to OPENAI_API_KEY from the
    // environment, which must not reach a server it was not configured for.
    apiKey: e.apiKey ?? '',
    // null unsets the SDK's `Authorization: Bearer <key>` for keyless servers.
    ...(e.apiKey ? {} : { defaultHeaders: { Authorization: null } }),
    // Otherwise read from OPENAI_ORG_ID / OPENAI_PROJECT_ID and sent to every server.
    organization: null,
    project: null,
    maxRetries: 0,
    timeout: e.timeoutMs,
    // Failures reach our own logs as classified errors; the SDK would write to the console
    // (and OPENAI_LOG=debug would print request bodies there).
    logLevel: 'off',
    ...(e.fetch ? { fetch: e.fetch } : {}),
  });
}

export interface OpenAiFailure {
  /** Transport failures, time-outs, 408, 409, 429, 5xx and broken streams; not other 4xx. */
  retryable: boolean;
  /** The HTTP status, when the server answered one. */
  status?: number;
  /** The server's Retry-After (or retry-after-ms), a hint for the next attempt. */
  retryAfterMs?: number;
  /**
   * status: the server answered an error status; timeout: no answer in time;
   * transport: no connection, or it broke; provider: an error reported inside a 200
   * stream; malformed: an answer that is not the protocol; aborted: a caller's signal
   * fired; client: the SDK refused the request before sending it.
   */
  kind: 'status' | 'timeout' | 'transport' | 'provider' | 'malformed' | 'aborted' | 'client';
  /** What went wrong, for a message: the server's error text or the socket error; never the key. */
  detail: string;
}

/** A model an OpenAI-compatible server offers (`GET /v1/models`). */

/**
 * The models the server offers to this key (`GET /v1/models`). Throws what the SDK
 * throws: classify it with `classifyOpenAiError`.
 */
export async function listModels(e: OpenAiEndpoint): Promise<ListedModel[]> {
  const client = openAiClient(e);
  return withDeadline(e.timeoutMs, async (signal) => {
    const out: ListedModel[] = [];
    // The list is one page on OpenAI and the common servers; the SDK follows any further ones.
    for await (const m of client.models.list({ signal })) {
      if (typeof m?.id !== 'string') continue;
      const model: ListedModel = { id: m.id };
      if (typeof m.owned_by === 'string') model.ownedBy = m.owned_by;
      if (typeof m.created === 'number') model.created = m.created;
      out.push(model);
      if (out.length >= MAX_LISTED_MODELS) break;
    }
    return out;
  });
}

/** Servers such as OpenRouter list hundreds of models; a credential's resources stop here. */
export const MAX_LISTED_MODELS = 1000;

/** Statuses worth a retry: time-outs, conflicts on the server's locks, rate limits, server errors. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** What anything thrown by an SDK call (or by reading its stream) means; `apiKey` is redacted from the detail. */
export function classifyOpenAiError(err: unknown, apiKey?: string): OpenAiFailure {
  const f = classify(err);
  // Redacted before the cut: a key straddling it leaves no prefix behind.
  return { ...f, detail: redactSecret(f.detail, apiKey, { maxLength: 4000 }).replace(/\s+/g, ' ').trim().slice(0, 500) };
}

function classify(err: unknown): OpenAiFailure {
  if (err instanceof APIUserAbortError) return { retryable: true, kind: 'aborted', detail: 'the request was cancelled' };
  if (err instanceof APIConnectionTimeoutError) return { retryable: true, kind: 'timeout', detail: 'no answer in time' };
  if (err instanceof APIConnectionError) return { retryable: true, kind: 'transport', detail: describe(err.cause ?? err) };
  if (err instanceof APIError) {
    if (err.status === undefined) return { retryable: true, kind: 'provider', detail: providerMessage(err) };
    // The server's own verdict wins, as the SDK's retry logic has it (OpenAI sends it).
    const verdict = err.headers?.get('x-should-retry');
    const retryable = verdict === 'true' ? true : verdict === 'false' ? false : isRetryableStatus(err.status);
    const retryAfterMs = retryable ? retryAfter(err.headers) : undefined;
    return { retryable, kind: 'status', status: err.status, detail: providerMessage(err), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  }
  // The SDK parses each stream event as JSON and rethrows the SyntaxError.
  if (err instanceof SyntaxError) return { retryable: true, kind: 'malformed', detail: `the answer is not valid JSON (${err.message})` };
  // Anything else the SDK throws itself is a request it would never send.
  if (err instanceof OpenAIError) return { retryable: false, kind: 'client', detail: err.message };
  // A body cut off while it was read (undici's "terminated"), a reset socket.
  return { retryable: true, kind: 'transport', detail: describe(err) };
}

/** The server's error message: `{error: {message}}`, `{error: "..."}`, or the raw text the SDK kept. */
function providerMessage(err: APIError): string {
  const body: unknown = err.error;
  if (typeof body === 'string') return body;
  if (body && typeof body === 'object') {
    const message = (body as { message?: unknown }).message;
    return typeof message === 'string' ? message : JSON.stringify(body);
  }
  // A body that is not JSON: the SDK's message is "<status> <text>".
  const text = err.status !== undefined ? err.message.replace(new RegExp(`^${err.status} `), '') : err.message;
  return text === 'status code (no body)' ? '' : text;
}

/** retry-after-ms (OpenAI's), else Retry-After in seconds or as an HTTP date. */
function retryAfter(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms') ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const header = headers?.get('retry-after');
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** fetch hides the socket error in `cause` ("fetch failed" → ECONNREFUSED); follows the chain. */
function describe(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e && depth < 4; depth++) {
    const { message, code } = e as { message?: unknown; code?: unknown };
    const part = [typeof code === 'string' ? code : '', typeof message === 'string' ? message : String(e)].filter(Boolean).join(' ');
    if (part && !parts.includes(part)) parts.push(part);
    e = (e as { cause?: unknown }).cause;
  }
  return parts.join(': ') || 'unknown error';
}

/** Provider error bodies may echo the key back (also encoded or split up); it never leaves in a message. */
export function redact(text: string, secret: string | undefined): string {
  return redactSecret(text, secret);
}

/**
 * Runs `call` with a signal that fires after `timeoutMs`, and reports that as the SDK's
 * own time-out error. The SDK's `timeout` stops at the response headers; this deadline
 * covers reading the body too. It also keeps the classification right where the SDK
 * cannot tell its abort from a transport error (under Jest, fetch's AbortError comes from
 * another realm and is not an `Error` there).
 */
export async function withDeadline<T>(timeoutMs: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const deadline = AbortSignal.timeout(timeoutMs);
  try {
    return await call(deadline);
  } catch (err) {
    if (deadline.aborted) throw new APIConnectionTimeoutError();
    throw err;
  }
}

/** Longest wait a Retry-After hint may impose on an in-process retry. */
export const MAX_RETRY_WAIT_MS = 60_000;

export interface RetryOptions {
  /** Further attempts after a retryable failure. */
  maxRetries: number;
  /** First wait, doubled each time; a Retry-After hint wins (up to MAX_RETRY_WAIT_MS). */
  baseDelayMs: number;
}

/**
 * Runs `call` again after a retryable failure (by `classifyOpenAiError`), rethrowing the
 * last failure as it was. Only for calls made outside Temporal's retries.
 */
export async function withRetries<T>(call: () => Promise<T>, opts: RetryOptions): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const f = classifyOpenAiError(err);
      if (!f.retryable || f.kind === 'aborted' || attempt >= opts.maxRetries) throw err;
      await new Promise<void>((resolve) => setTimeout(resolve, Math.min(f.retryAfterMs ?? opts.baseDelayMs * 2 ** attempt, MAX_RETRY_WAIT_MS)));
    }
  }
}
