import type OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsBase, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { OperationalError } from '../../lib/failures';
import { cappedFetch } from '../../lib/net/pinned-fetch';
import { classifyOpenAiError, openAiClient, redact } from './openai';

/**
 * Chat completions from an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama,
 * LiteLLM, ...) through the `openai` SDK client of ./openai: plain JSON, or SSE streaming
 * with text deltas and tool calls.
 *
 * No retries here: every failure is an `LlmError` that says whether retrying can help
 * (classified in ./openai), and the caller (an activity) decides.
 */

/** An OpenAI-compatible endpoint: LLM_BASE_URL, LLM_API_KEY, LLM_MODEL. */
export interface LlmSettings {
  /** With or without a trailing `/v1`. */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** Deadline for a whole call, a streamed reply included. Default 60 s. */
  timeoutMs?: number;
  /** Replaces the SDK's fetch: a connection pinned to checked addresses, for a workspace's own base_url (domain/credentials/credentials.ts). */
  fetch?: typeof fetch;
  /** Bytes of one answer (a streamed reply's whole SSE body) read at most. Default LLM_MAX_RESPONSE_BYTES. */
  maxResponseBytes?: number;
}

/**
 * A streamed reply spends roughly 150–250 bytes of SSE per token: 32 MiB holds the longest
 * reply a model writes (over 100 000 tokens), and stops a server that never stops.
 */
export const LLM_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

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
  /**
   * `json_object` asks the model for one JSON object (OpenAI's JSON mode); `json_schema`
   * for one that matches a schema (structured outputs; llama.cpp turns it into a grammar).
   */
  response_format?: { type: 'json_object' | 'text' } | { type: 'json_schema'; json_schema: { name: string; schema: Record<string, unknown>; strict?: boolean } };
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

/** A model call that failed; its code is `LlmError` when a retry may succeed, `LlmRejected` when not. */
export class LlmError extends OperationalError {
  constructor(
    message: string,
    /** As classified in ./openai: transport failures, timeouts, 408, 409, 429, 5xx and broken streams; not other 4xx. */
    retryable: boolean,
    /** The HTTP status, when the endpoint answered one. */
    readonly status?: number,
    /** The Retry-After hint of a retryable status. */
    retryAfterMs?: number,
  ) {
    super(retryable ? 'LlmError' : 'LlmRejected', message, retryable, { retryAfterMs });
    this.name = 'LlmError';
  }
}

/** An error thrown by the caller's onDelta: passed through untouched, never classified as ours. */
class CallerError {
  constructor(readonly cause: unknown) {}
}

export class OpenAiCompatibleModel implements ChatModel {
  private readonly client: OpenAI;

  constructor(private readonly settings: LlmSettings) {
    this.client = openAiClient({
      baseUrl: settings.baseUrl,
      apiKey: settings.apiKey,
      timeoutMs: settings.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS,
      // A workspace's own base_url comes with a pinned fetch; either way the answer is read up to the cap.
      fetch: cappedFetch(settings.fetch ?? ((input, init) => fetch(input, init)), settings.maxResponseBytes ?? LLM_MAX_RESPONSE_BYTES),
    });
  }

  async complete(req: CompletionRequest, onDelta?: (text: string) => void | Promise<void>): Promise<CompletionResult> {
    const timeoutMs = this.settings.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS;
    // The SDK's own timeout ends when the headers arrive; this one covers a streamed reply too.
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = req.signal ? AbortSignal.any([deadline, req.signal]) : deadline;
    let streaming = false;
    const fail = (err: unknown): unknown => {
      if (err instanceof CallerError) return err.cause;
      // The SDK ends a stream quietly when its signal fires: whatever was thrown then, say why.
      if (req.signal?.aborted) return req.signal.reason;
      const late = new LlmError(`The language model did not answer within ${timeoutMs} ms`, true);
      if (deadline.aborted) return late;
      // Ours, from reading the answer: it may quote the provider, who may echo the key.
      if (err instanceof LlmError) return new LlmError(redact(err.message, this.settings.apiKey), err.retryable, err.status, err.retryAfterMs);
      const f = classifyOpenAiError(err, this.settings.apiKey);
      if (f.kind === 'timeout') return late;
      const message =
        f.kind === 'status'
          ? `The language model answered HTTP ${f.status}${f.detail ? `: ${f.detail}` : ''}`
          : f.kind === 'provider'
            ? `The language model reported an error${streaming ? ' mid-stream' : ''}: ${f.detail}`
            : f.kind === 'malformed'
              ? `The language model answered with something that is not the protocol: ${f.detail}`
              : streaming
                ? `The language model connection broke off: ${f.detail}`
                : `The language model could not be reached: ${f.detail}`;
      return new LlmError(message, f.retryable, f.status, f.retryAfterMs);
    };

    try {
      const body = this.wireRequest(req);
      if (!onDelta) return readCompletion(await this.client.chat.completions.create(body, { signal }));
      // include_usage: the token counts arrive in a last chunk with empty choices.
      const stream = await this.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal });
      streaming = true;
      return await readStream(stream, async (text) => {
        try {
          await onDelta(text);
        } catch (err) {
          throw new CallerError(err);
        }
      });
    } catch (err) {
      throw fail(err);
    }
  }

  private wireRequest(req: CompletionRequest): Omit<ChatCompletionCreateParamsBase, 'stream'> {
    return {
      model: req.model ?? this.settings.model,
      messages: req.messages.map(
        (m) =>
          ({
            role: m.role,
            content: m.content,
            ...(m.tool_calls?.length
              ? { tool_calls: m.tool_calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
              : {}),
            ...(m.tool_call_id !== undefined ? { tool_call_id: m.tool_call_id } : {}),
          }) as ChatCompletionMessageParam,
      ),
      ...(req.tools?.length
        ? { tools: req.tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters } })) }
        : {}),
      ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
      ...(req.max_tokens !== undefined ? { max_tokens: req.max_tokens } : {}),
      ...(req.response_format ? { response_format: req.response_format } : {}),
    };
  }
}

// What we read of an answer. Typed loosely on purpose: compatible servers leave out
// fields the SDK's types call required (a tool call's `index`, `usage` members).
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
  error?: unknown;
}

/** A non-streamed answer; the SDK has parsed the JSON (or handed back text that was not JSON). */
function readCompletion(answer: unknown): CompletionResult {
  const body = answer as WireBody | null;
  if (!body || typeof body !== 'object') throw new LlmError('The language model answered with a body that is not a JSON object', true);
  if (body.error !== undefined && body.error !== null) throw new LlmError(`The language model reported an error: ${errorText(body.error)}`, true);
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

/** The SDK's stream of parsed chunks; it throws on an `error` event, a chunk that is not JSON, or a broken body. */
async function readStream(stream: AsyncIterable<ChatCompletionChunk>, emit: (text: string) => Promise<void>): Promise<CompletionResult> {
  const calls = new ToolCalls();
  let text = '';
  let finishReason: string | undefined;
  let usage: CompletionResult['usage'];

  // Leaving this loop early (return, throw) aborts the request and frees the socket.
  for await (const raw of stream) {
    const chunk = raw as unknown as WireBody;
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
  // A stream cut short may look like a clean end of the body (and the SDK ends quietly
  // when it is aborted): only finish_reason tells that the turn is whole.
  if (finishReason === undefined) throw new LlmError('The language model stream ended before the reply was complete', true);
  return { text, tool_calls: calls.done(), finish_reason: finishReason, ...(usage ? { usage } : {}) };
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

function errorText(error: unknown): string {
  if (typeof error === 'string') return error;
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' ? message : JSON.stringify(error);
}

function usageOf(body: WireBody): Pick<CompletionResult, 'usage'> {
  const u = body.usage;
  if (!u || typeof u !== 'object') return {};
  return { usage: { prompt_tokens: u.prompt_tokens ?? 0, completion_tokens: u.completion_tokens ?? 0 } };
}
