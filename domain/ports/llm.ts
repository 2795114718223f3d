import { OperationalError } from '../../lib/failures';

/**
 * The language model's port: chat completions with tools, from whatever serves them
 * (providers/llm/model.ts: any OpenAI-compatible server). Every failure is an LlmError
 * that says whether retrying can help; the caller (an activity) decides.
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
    /** As the provider classifies it (providers/llm/openai.ts): transport failures, timeouts, 408, 409, 429, 5xx and broken streams; not other 4xx. */
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

/** Opens a model at an endpoint (the composition root passes the OpenAI-compatible one). */
export type ModelFactory = (settings: LlmSettings) => ChatModel;

/** One model an endpoint offers (`GET /v1/models`). */
export interface ListedModel {
  id: string;
  ownedBy?: string;
  /** Unix seconds, when the server says. */
  created?: number;
}

/**
 * The models an endpoint offers a key. A failure is an LlmError whose message says what went wrong (`HTTP 401: …`,
 * `timeout: …`), the key redacted, and whose status is the server's when it answered one.
 */
export type ModelLister = (endpoint: { baseUrl: string; apiKey?: string; timeoutMs: number; fetch?: typeof fetch }) => Promise<ListedModel[]>;
