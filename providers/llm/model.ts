import type OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsBase, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { cappedFetch } from '../../lib/net/pinned-fetch';
import { classifyOpenAiError, listModels, openAiClient, redact } from './openai';
import { LlmError, type LlmSettings, type ToolCall, type CompletionRequest, type CompletionResult, type ChatModel, type ModelLister } from '../../domain/ports/llm';
export { LlmError, type LlmSettings, type ToolCall, type ChatTurnMessage, type ToolDefinition, type CompletionRequest, type CompletionResult, type ChatModel } from '../../domain/ports/llm';

/**
 * Chat completions from an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama,
 * LiteLLM, ...) through the `openai` SDK client of ./openai: plain JSON, or SSE streaming
 * with text deltas and tool calls.
 *
 * No retries here: every failure is an `LlmError` that says whether retrying can help
 * (classified in ./openai), and the caller (an activity) decides.
 */

/**
 * A streamed reply spends roughly 150–250 bytes of SSE per token: 32 MiB holds the longest
 * reply a model writes (over 100 000 tokens), and stops a server that never stops.
 */
export const LLM_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

export const DEFAULT_LLM_TIMEOUT_MS = 60_000;

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

/** The models an OpenAI-compatible server offers a key, failures as the port's LlmError (the key redacted). */
export const listOpenAiModels: ModelLister = async (endpoint) => {
  try {
    return await listModels(endpoint);
  } catch (err) {
    const f = classifyOpenAiError(err, endpoint.apiKey);
    const what = f.kind === 'status' ? `HTTP ${f.status}${f.detail ? `: ${f.detail}` : ''}` : `${f.kind}: ${f.detail}`;
    throw new LlmError(what, f.retryable, f.status);
  }
};
