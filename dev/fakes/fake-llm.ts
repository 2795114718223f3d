import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A fake OpenAI-compatible chat-completions server on loopback, speaking the real wire
 * protocol: `GET /v1/models` (a `list` of `model` objects, bearer-checked when `apiKey`
 * is set), `POST /v1/chat/completions`, a `chat.completion` JSON body, or with
 * `stream: true` server-sent events — a role chunk, text deltas, tool calls whose
 * `function.arguments` arrive in several fragments keyed by `index`, a finish_reason
 * chunk, a usage chunk with empty choices (when `stream_options.include_usage`), then
 * `data: [DONE]`. Errors use OpenAI's `{error: {message, type, code}}` body.
 */

export interface FakeLlmReply {
  /** The assistant's text; with `status`, the error message instead. */
  text?: string;
  tool_calls?: Array<{ name: string; arguments: unknown }>;
  /** Answer this HTTP status (an OpenAI error body) instead of a completion. */
  status?: number;
  /** Streaming only: stop after this many data events, with no finish_reason and no [DONE];
   *  'end' closes the response cleanly, 'reset' destroys the socket. */
  cut?: { afterEvents: number; how?: 'end' | 'reset' };
}

export interface FakeLlm {
  /** The base URL to use as LLM_BASE_URL (no `/v1`). */
  url: string;
  /** Every request received, in order. */
  requests: Array<{ body: any; headers: Record<string, string | string[] | undefined> }>;
  /** Every `GET /v1/models` received (kept apart, so `requests` indexes stay chat completions). */
  modelRequests: Array<{ headers: Record<string, string | string[] | undefined> }>;
  close(): Promise<void>;
}

export interface FakeLlmOptions {
  /** Decides each answer; `index` counts requests from 0. Default: echoes the last user message. */
  reply?: (body: any, index: number) => FakeLlmReply | Promise<FakeLlmReply>;
  /** Latency before the response starts (benchmarks subtract it). */
  firstByteDelayMs?: number;
  /** Delay between SSE events. */
  chunkDelayMs?: number;
  /** Text (and tool-call arguments) per delta; default 8 characters. */
  chunkChars?: number;
  /** What `GET /v1/models` lists; default `['fake-model']`. */
  models?: string[];
  /** When set, `GET /v1/models` answers 401 (OpenAI's invalid_api_key body) to any other bearer token. */
  apiKey?: string;
  /** Streaming only: called after the first delta has been written; the stream waits for the promise (crash tests). */
  holdStream?: (index: number) => Promise<void> | undefined;
}

/** The text of the last user message of a chat-completions request ('' when none). */
export const lastUserText = (body: any): string => {
  const lastUser = [...(body?.messages ?? [])].reverse().find((m: { role?: string }) => m.role === 'user');
  return typeof lastUser?.content === 'string' ? lastUser.content : '';
};

export const echoReply = (body: any): FakeLlmReply => ({ text: `You said: ${lastUserText(body)}` });

export async function startFakeLlm(opts: FakeLlmOptions = {}): Promise<FakeLlm> {
  const requests: FakeLlm['requests'] = [];
  const modelRequests: FakeLlm['modelRequests'] = [];
  // Aborted by close(): no delay outlives the server.
  const closing = new AbortController();
  const wait = (ms: number) => sleep(ms, undefined, { signal: closing.signal });
  const server = http.createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, `fake LLM failed: ${(err as Error).message}`);
      else res.destroy();
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    if (req.method === 'GET' && req.url?.split('?')[0] === '/v1/models') {
      modelRequests.push({ headers: { ...req.headers } });
      if (opts.apiKey !== undefined && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
        // OpenAI's answer, which shows the end of the key it was given.
        const given = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
        return sendError(res, 401, `Incorrect API key provided: ${given.slice(0, 3)}****${given.slice(-4)}. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', 'invalid_api_key');
      }
      const created = Math.floor(Date.now() / 1000);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: (opts.models ?? ['fake-model']).map((id) => ({ id, object: 'model', created, owned_by: 'fake-llm' })) }));
      return;
    }
    if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/chat/completions') {
      return sendError(res, 404, `Unknown request URL: ${req.method} ${req.url}`, 'invalid_request_error');
    }
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      return sendError(res, 400, 'We could not parse the JSON body of your request.', 'invalid_request_error');
    }
    const index = requests.length;
    requests.push({ body, headers: { ...req.headers } });
    const reply = await (opts.reply ?? echoReply)(body, index);
    if (opts.firstByteDelayMs) await wait(opts.firstByteDelayMs);
    if (res.destroyed) return;
    if (reply.status !== undefined) {
      return sendError(res, reply.status, reply.text ?? `fake error ${reply.status}`, reply.status >= 500 ? 'server_error' : 'invalid_request_error');
    }

    const id = `chatcmpl-fake${index}`;
    const created = Math.floor(Date.now() / 1000);
    const model = typeof body.model === 'string' ? body.model : 'fake';
    const text = reply.text ?? '';
    const calls = (reply.tool_calls ?? []).map((c, i) => ({
      id: `call_fake${index}_${i}`,
      name: c.name,
      arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {}),
    }));
    const finishReason = calls.length ? 'tool_calls' : 'stop';
    const usage = {
      prompt_tokens: tokens(JSON.stringify(body.messages ?? [])),
      completion_tokens: tokens(text + calls.map((c) => c.name + c.arguments).join('')),
      total_tokens: 0,
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;

    if (!body.stream) {
      const message = {
        role: 'assistant',
        content: calls.length && !text ? null : text,
        ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
      };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, object: 'chat.completion', created, model, choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }], usage }));
      return;
    }

    const size = Math.max(1, opts.chunkChars ?? 8);
    const chunk = (delta: object, finish: string | null = null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    const deltas: object[] = [];
    for (const piece of pieces(text, size)) deltas.push(chunk({ content: piece }));
    calls.forEach((c, i) => {
      deltas.push(chunk({ tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }));
      for (const piece of pieces(c.arguments, size)) deltas.push(chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] }));
    });
    const events: object[] = [chunk({ role: 'assistant', content: '' }), ...deltas, chunk({}, finishReason)];
    if (body.stream_options?.include_usage) events.push({ id, object: 'chat.completion.chunk', created, model, choices: [], usage });

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    for (const [n, event] of events.entries()) {
      if (reply.cut && n >= reply.cut.afterEvents) {
        if (reply.cut.how === 'reset') res.destroy();
        else res.end();
        return;
      }
      if (n > 0 && opts.chunkDelayMs) await wait(opts.chunkDelayMs);
      if (res.destroyed) return;
      // Flushed before going on, so a later cut or hold never swallows what was written.
      await new Promise<void>((resolve) => res.write(`data: ${JSON.stringify(event)}\n\n`, () => resolve()));
      // n === 1: the first delta (event 0 is the role chunk).
      if (n === 1 && deltas.length && opts.holdStream) await opts.holdStream(index);
    }
    if (res.destroyed) return;
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    modelRequests,
    close: () =>
      new Promise<void>((resolve) => {
        // Held or slow streams must not keep close() waiting.
        closing.abort();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function sendError(res: http.ServerResponse, status: number, message: string, type = 'invalid_request_error', code: string | null = null): void {
  res.writeHead(status, { 'content-type': 'application/json', ...(status === 429 ? { 'retry-after': '1' } : {}) });
  res.end(JSON.stringify({ error: { message, type, param: null, code } }));
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** Splits by code point, so an emoji never straddles two deltas. */
function pieces(s: string, size: number): string[] {
  const points = Array.from(s);
  const out: string[] = [];
  for (let i = 0; i < points.length; i += size) out.push(points.slice(i, i + size).join(''));
  return out;
}

/** A stand-in token count: deterministic, about four characters a token. */
const tokens = (s: string) => Math.ceil(s.length / 4);
