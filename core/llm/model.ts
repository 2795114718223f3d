import { createParser } from 'eventsource-parser';

/**
 * One client for OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp, Ollama,
 * LiteLLM, ...): plain JSON, or SSE streaming with text deltas and tool calls.
 *
 * Built on fetch + `eventsource-parser` rather than the `openai` SDK: the SDK's current
 * major needs Node 22 (we run 20), and it brings its own retries and timeouts, which
 * would stack on Temporal's retry policy. What the SDK would add over this file is the
 * tool-call accumulation, a few lines below.
 *
 * No retries here: every failure is an `LlmError` that says whether retrying can help,
 * and the caller (an activity) decides.
 */

/** An OpenAI-compatible endpoint: LLM_BASE_URL, LLM_API_KEY, LLM_MODEL. */
export interface LlmSettings {
  /** With or without a trailing `/v1`. */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** Deadline for a whole call, a streamed reply included. Default 60 s. */
  timeoutMs?: number;
}

export const DEFAULT_LLM_TIMEOUT_MS = 60_000;

export interface ToolCall {
  id: string;
  name: string;
  /** JSON text as the model wrote it ('{}' when it wrote none). */
  arguments: string;
}

export interface ChatTurnMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  /** Assistant messages that called tools. */
  tool_calls?: ToolCall[];
  /** Tool results: the id of the call they answer. */
  tool_call_id?: string;
}

export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
}

export interface CompletionRequest {
  messages: ChatTurnMessage[];
  tools?: ToolDefinition[];
  /** Overrides the configured model. */
  model?: string;
  temperature?: number;
  max_tokens?: number;
  /** `json_object` asks the model for one JSON object (OpenAI's JSON mode). */
  response_format?: { type: 'json_object' | 'text' };
  /** The caller's cancellation; when it fires, the call rejects with the signal's own reason. */
  signal?: AbortSignal;
}

export interface CompletionResult {
  text: string;
  tool_calls: ToolCall[];
  finish_reason: string;
  usage?: { prompt_tokens: number; completion_tokens: number };
}

export interface ChatModel {
  /** Streams when onDelta is given (SSE), calling it with each text fragment in order; resolves with the whole turn. */
  complete(req: CompletionRequest, onDelta?: (text: string) => void | Promise<void>): Promise<CompletionResult>;
}

export class LlmError extends Error {
  constructor(
    message: string,
    /** Transport failures, timeouts, 408, 429, 5xx and broken streams; not other 4xx. */
    readonly retryable: boolean,
    /** The HTTP status, when the endpoint answered one. */
    readonly status?: number,
    /** From a 429/503's Retry-After header. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'LlmError';
  }
}

/** `{baseUrl}/v1/chat/completions`, whether baseUrl ends in `/v1` or not. */
export function chatCompletionsUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1/chat/completions`;
}

// The wire format, as far as we read it.
interface WireToolCall {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}
interface WireChoice {
  message?: { content?: string | null; tool_calls?: WireToolCall[] };
  delta?: { content?: string | null; tool_calls?: WireToolCall[] };
  finish_reason?: string | null;
}
interface WireBody {
  choices?: WireChoice[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: { message?: string } | string;
}

/** An error thrown by the caller's onDelta: passed through untouched, never classified as ours. */
class CallerError {
  constructor(readonly cause: unknown) {}
}

export class OpenAiCompatibleModel implements ChatModel {
  constructor(private readonly settings: LlmSettings) {}

  async complete(req: CompletionRequest, onDelta?: (text: string) => void | Promise<void>): Promise<CompletionResult> {
    const timeoutMs = this.settings.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS;
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = req.signal ? AbortSignal.any([deadline, req.signal]) : deadline;
    const classify = (err: unknown, doing: string): unknown => {
      if (err instanceof CallerError) return err.cause;
      if (err instanceof LlmError) return this.redacted(err);
      if (req.signal?.aborted) return req.signal.reason;
      if (deadline.aborted) return new LlmError(`The language model did not answer within ${timeoutMs} ms`, true);
      return this.redacted(new LlmError(`${doing}: ${describe(err)}`, true));
    };

    let res: Response;
    try {
      res = await fetch(chatCompletionsUrl(this.settings.baseUrl), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: onDelta ? 'text/event-stream' : 'application/json',
          ...(this.settings.apiKey ? { authorization: `Bearer ${this.settings.apiKey}` } : {}),
        },
        body: JSON.stringify(this.wireRequest(req, onDelta !== undefined)),
        signal,
      });
    } catch (err) {
      throw classify(err, 'The language model could not be reached');
    }
    try {
      if (!res.ok) throw await statusError(res);
      if (!onDelta) return readJson(await res.text());
      return await readStream(res, async (text) => {
        try {
          await onDelta(text);
        } catch (err) {
          throw new CallerError(err);
        }
      });
    } catch (err) {
      throw classify(err, 'The language model connection broke off');
    }
  }

  private wireRequest(req: CompletionRequest, stream: boolean): Record<string, unknown> {
    return {
      model: req.model ?? this.settings.model,
      messages: req.messages.map((m) => ({
        role: m.role,
        content: m.content,
        ...(m.tool_calls?.length
          ? { tool_calls: m.tool_calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
          : {}),
        ...(m.tool_call_id !== undefined ? { tool_call_id: m.tool_call_id } : {}),
      })),
      ...(req.tools?.length
        ? { tools: req.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) }
        : {}),
      ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
      ...(req.max_tokens !== undefined ? { max_tokens: req.max_tokens } : {}),
      ...(req.response_format ? { response_format: req.response_format } : {}),
      // include_usage: the token counts arrive in a last chunk with empty choices.
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    };
  }

  /** Provider error bodies may echo the key; it never leaves this class in a message. */
  private redacted(err: LlmError): LlmError {
    const key = this.settings.apiKey;
    if (!key || !err.message.includes(key)) return err;
    return new LlmError(err.message.split(key).join('[redacted]'), err.retryable, err.status, err.retryAfterMs);
  }
}

async function statusError(res: Response): Promise<LlmError> {
  const raw = await res.text().catch(() => '');
  let detail = raw;
  try {
    detail = errorMessage(JSON.parse(raw) as WireBody | null) ?? raw;
  } catch {
    // Not JSON: keep the text.
  }
  detail = detail.replace(/\s+/g, ' ').trim().slice(0, 300);
  const retryable = res.status === 408 || res.status === 429 || res.status >= 500;
  return new LlmError(`The language model answered HTTP ${res.status}${detail ? `: ${detail}` : ''}`, retryable, res.status, retryAfterMs(res.headers.get('retry-after')));
}

function readJson(raw: string): CompletionResult {
  let body: WireBody | null;
  try {
    body = JSON.parse(raw) as WireBody;
  } catch {
    body = null;
  }
  if (!body || typeof body !== 'object') throw new LlmError('The language model answered with a body that is not a JSON object', true);
  const error = errorMessage(body);
  if (error !== undefined) throw new LlmError(`The language model reported an error: ${error}`, true);
  const choice = body.choices?.[0];
  if (!choice?.message) throw new LlmError('The language model answered without a choice', true);
  const calls = new ToolCalls();
  calls.add(choice.message.tool_calls);
  return {
    text: choice.message.content ?? '',
    tool_calls: calls.done(),
    finish_reason: choice.finish_reason ?? 'stop',
    ...usageOf(body),
  };
}

async function readStream(res: Response, emit: (text: string) => Promise<void>): Promise<CompletionResult> {
  if (!res.body) throw new LlmError('The language model answered without a body', true);
  const events: string[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event.data) });
  const decoder = new TextDecoder();
  const calls = new ToolCalls();
  let text = '';
  let finishReason: string | undefined;
  let usage: CompletionResult['usage'];
  let done = false;

  // Leaving this loop early (return, throw) cancels the body and frees the socket.
  for await (const bytes of res.body) {
    parser.feed(decoder.decode(bytes, { stream: true }));
    for (const data of events.splice(0)) {
      if (data.trim() === '[DONE]') {
        done = true;
        break;
      }
      let chunk: WireBody | null;
      try {
        chunk = JSON.parse(data) as WireBody;
      } catch {
        chunk = null;
      }
      if (!chunk || typeof chunk !== 'object') throw new LlmError('The language model sent a stream event that is not a JSON object', true);
      const error = errorMessage(chunk);
      if (error !== undefined) throw new LlmError(`The language model reported an error mid-stream: ${error}`, true);
      usage = usageOf(chunk).usage ?? usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const content = choice.delta?.content;
      if (content) {
        text += content;
        await emit(content);
      }
      calls.add(choice.delta?.tool_calls);
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    if (done) break;
  }
  // A stream cut short may look like a clean end of the body: only finish_reason or
  // [DONE] tell that the turn is whole.
  if (!done && finishReason === undefined) throw new LlmError('The language model stream ended before the reply was complete', true);
  return { text, tool_calls: calls.done(), finish_reason: finishReason ?? 'stop', ...(usage ? { usage } : {}) };
}

/**
 * Tool calls put together from their fragments: `id` and `function.name` come first,
 * `function.arguments` in pieces, all keyed by `index`.
 */
class ToolCalls {
  private readonly calls: ToolCall[] = [];

  add(fragments: WireToolCall[] | undefined): void {
    for (const f of fragments ?? []) {
      // Some servers leave out index (each call whole in one chunk): a new id is a new call.
      const at =
        typeof f.index === 'number' ? f.index : f.id !== undefined && !this.calls.some((c) => c?.id === f.id) ? this.calls.length : Math.max(this.calls.length - 1, 0);
      const call = (this.calls[at] ??= { id: '', name: '', arguments: '' });
      if (f.id) call.id = f.id;
      // Whole in its first fragment; some servers repeat it in later ones.
      if (f.function?.name) call.name = f.function.name;
      if (f.function?.arguments) call.arguments += f.function.arguments;
    }
  }

  done(): ToolCall[] {
    return this.calls
      .filter((c) => c !== undefined)
      .map((c, i) => ({ id: c.id || `call_${i}`, name: c.name, arguments: c.arguments || '{}' }));
  }
}

function errorMessage(body: WireBody | null): string | undefined {
  const error = body?.error;
  if (error === undefined || error === null) return undefined;
  return typeof error === 'string' ? error : (error.message ?? JSON.stringify(error));
}

function usageOf(body: WireBody): Pick<CompletionResult, 'usage'> {
  const u = body.usage;
  if (!u || typeof u !== 'object') return {};
  return { usage: { prompt_tokens: u.prompt_tokens ?? 0, completion_tokens: u.completion_tokens ?? 0 } };
}

function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** fetch hides the socket error in `cause` ("fetch failed" / "terminated"). */
function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause ? [e.cause.code, e.cause.message].filter(Boolean).join(' ') : '';
  return [e?.message ?? String(err), cause ? `(${cause})` : ''].filter(Boolean).join(' ');
}
