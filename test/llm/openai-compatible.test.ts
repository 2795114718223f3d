import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LlmError, OpenAiCompatibleModel, type ChatTurnMessage, type CompletionResult, type ToolDefinition } from '../../providers/llm/model';
import { startFakeLlm, type FakeLlm, type FakeLlmOptions } from '../../dev/fakes/fake-llm';

const fakes: FakeLlm[] = [];
afterAll(async () => {
  await Promise.all(fakes.map((f) => f.close()));
});

async function fake(opts: FakeLlmOptions): Promise<FakeLlm> {
  const f = await startFakeLlm(opts);
  fakes.push(f);
  return f;
}

/** Expects `p` to reject with an LlmError and returns it. */
async function llmError(p: Promise<unknown>): Promise<LlmError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(LlmError);
    return err as LlmError;
  }
  throw new Error('expected an LlmError');
}

const USER: ChatTurnMessage[] = [
  { role: 'system', content: 'You help customers of a parcel service.' },
  { role: 'user', content: 'When does my parcel ship?' },
];

const TOOLS: ToolDefinition[] = [
  { name: 'kb_search', description: 'Search the knowledge base', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } },
  { name: 'handoff', description: 'Hand the conversation to a person', parameters: { type: 'object', properties: { reason: { type: 'string' } } } },
];

describe('the fake LLM speaks the streaming protocol', () => {
  test('tool-call arguments arrive in several fragments keyed by index, then finish_reason, usage and [DONE]', async () => {
    const llm = await fake({
      chunkChars: 4,
      reply: () => ({ tool_calls: [{ name: 'kb_search', arguments: { query: 'shipping days' } }, { name: 'handoff', arguments: { reason: 'asked for a person' } }] }),
    });
    const res = await fetch(`${llm.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: USER, stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const data = (await res.text()).split('\n\n').filter(Boolean).map((e) => e.replace(/^data: /, ''));
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    const fragments = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(fragments.filter((f: { index: number }) => f.index === 0).length).toBeGreaterThan(3);
    expect(fragments.filter((f: { index: number }) => f.index === 1).length).toBeGreaterThan(3);
    expect(chunks.at(-2).choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) } });
  });

  test('holdStream pauses the stream after the first delta until its promise settles', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const llm = await fake({ chunkChars: 4, reply: () => ({ text: 'first then the rest' }), holdStream: (i) => (i === 0 ? held : undefined) });
    const deltas: string[] = [];
    let firstDelta!: () => void;
    const gotFirst = new Promise<void>((r) => (firstDelta = r));
    const done = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' }).complete({ messages: USER }, (d) => {
      deltas.push(d);
      firstDelta();
    });
    await gotFirst;
    await new Promise((r) => setTimeout(r, 100));
    expect(deltas).toEqual(['firs']);
    release();
    expect((await done).text).toBe('first then the rest');
    expect(deltas.join('')).toBe('first then the rest');
  });
});

describe('OpenAiCompatibleModel', () => {
  test('streaming: text arrives as ordered deltas whose concatenation is the result text', async () => {
    const text = 'Your parcel ships on Monday 📦 and arrives by Wednesday. Anything else I can help with?';
    const llm = await fake({ chunkChars: 5, reply: () => ({ text }) });
    const model = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'gpt-test' });
    const deltas: string[] = [];
    const result = await model.complete({ messages: USER, temperature: 0.3, max_tokens: 200 }, (d) => {
      deltas.push(d);
    });
    expect(deltas.length).toBeGreaterThan(10);
    expect(deltas.join('')).toBe(text);
    expect(result).toEqual({ text, tool_calls: [], finish_reason: 'stop', usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) } });
    expect(result.usage!.completion_tokens).toBeGreaterThan(0);
    expect(llm.requests[0].body).toMatchObject({ model: 'gpt-test', stream: true, temperature: 0.3, max_tokens: 200, messages: USER });
    expect(llm.requests[0].body.tools).toBeUndefined();
  });

  test('streaming: an async onDelta is awaited before the next fragment is delivered', async () => {
    const llm = await fake({ chunkChars: 3, reply: () => ({ text: 'one two three four five' }) });
    const model = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' });
    let inFlight = 0;
    let overlapped = false;
    const deltas: string[] = [];
    const result = await model.complete({ messages: USER }, async (d) => {
      if (inFlight++ > 0) overlapped = true;
      await new Promise((r) => setTimeout(r, 5));
      deltas.push(d);
      inFlight--;
    });
    expect(overlapped).toBe(false);
    expect(deltas.join('')).toBe(result.text);
    expect(result.text).toBe('one two three four five');
  });

  test('streaming: two parallel tool calls split across fragments are reassembled by index', async () => {
    const llm = await fake({
      chunkChars: 4,
      reply: () => ({
        tool_calls: [
          { name: 'kb_search', arguments: { query: 'When do parcels ship on weekends?' } },
          { name: 'handoff', arguments: { reason: 'The customer asked for a person.' } },
        ],
      }),
    });
    const model = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' });
    const deltas: string[] = [];
    const result = await model.complete({ messages: USER, tools: TOOLS }, (d) => {
      deltas.push(d);
    });
    expect(deltas).toEqual([]);
    expect(result.finish_reason).toBe('tool_calls');
    expect(result.text).toBe('');
    expect(result.tool_calls).toEqual([
      { id: 'call_fake0_0', name: 'kb_search', arguments: JSON.stringify({ query: 'When do parcels ship on weekends?' }) },
      { id: 'call_fake0_1', name: 'handoff', arguments: JSON.stringify({ reason: 'The customer asked for a person.' }) },
    ]);
    // Tools go out in the wire format.
    expect(llm.requests[0].body.tools).toEqual(TOOLS.map((t) => ({ type: 'function', function: t })));
  });

  test('an assistant turn with tool calls and the tool results go back in the wire format', async () => {
    const llm = await fake({ reply: () => ({ text: 'It ships Monday.' }) });
    const model = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' });
    const history: ChatTurnMessage[] = [
      ...USER,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', name: 'kb_search', arguments: '{"query":"ship"}' }] },
      { role: 'tool', content: 'Parcels ship on Mondays.', tool_call_id: 'call_1' },
    ];
    await model.complete({ messages: history, tools: TOOLS });
    expect(llm.requests[0].body.messages.slice(2)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'kb_search', arguments: '{"query":"ship"}' } }] },
      { role: 'tool', content: 'Parcels ship on Mondays.', tool_call_id: 'call_1' },
    ]);
  });

  test('non-streaming: a plain JSON completion, with text, tool calls and usage', async () => {
    const llm = await fake({
      reply: (_body, i) => (i === 0 ? { text: 'Hello there.' } : { tool_calls: [{ name: 'kb_search', arguments: { query: 'returns' } }] }),
    });
    const model = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' });
    const text = await model.complete({ messages: USER, response_format: { type: 'json_object' } });
    expect(text).toEqual({ text: 'Hello there.', tool_calls: [], finish_reason: 'stop', usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) } });
    expect(llm.requests[0].body.stream).toBeUndefined();
    expect(llm.requests[0].body.response_format).toEqual({ type: 'json_object' });
    const tools: CompletionResult = await model.complete({ messages: USER, tools: TOOLS });
    expect(tools).toMatchObject({ text: '', finish_reason: 'tool_calls', tool_calls: [{ id: 'call_fake1_0', name: 'kb_search', arguments: '{"query":"returns"}' }] });
  });

  test('the Authorization header carries the API key when one is set, and only then', async () => {
    const llm = await fake({});
    await new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm', apiKey: 'sk-test-123' }).complete({ messages: USER });
    await new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' }).complete({ messages: USER }, () => undefined);
    expect(llm.requests[0].headers.authorization).toBe('Bearer sk-test-123');
    expect(llm.requests[1].headers.authorization).toBeUndefined();
  });

  test('the model in the request overrides the configured one', async () => {
    const llm = await fake({});
    await new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'configured' }).complete({ messages: USER, model: 'override' });
    expect(llm.requests[0].body.model).toBe('override');
  });

  test('the base URL works with and without /v1 and a trailing slash', async () => {
    const llm = await fake({});
    for (const baseUrl of [llm.url, `${llm.url}/`, `${llm.url}/v1`, `${llm.url}/v1/`]) {
      const result = await new OpenAiCompatibleModel({ baseUrl, model: 'm' }).complete({ messages: USER });
      expect(result.text).toBe('You said: When does my parcel ship?');
    }
    expect(llm.requests).toHaveLength(4);
  });

  test('HTTP 500, 503 and 429 are retryable LlmErrors; 400 and 401 are not; the API key never appears in a message', async () => {
    const key = 'sk-secret-key-9f8e7d';
    const llm = await fake({
      reply: (body) => ({ status: Number(body.messages[0].content), text: `Incorrect API key provided: ${key}` }),
    });
    const model = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm', apiKey: key });
    const ask = (status: number, stream: boolean) =>
      llmError(model.complete({ messages: [{ role: 'user', content: String(status) }] }, stream ? () => undefined : undefined));
    for (const stream of [false, true]) {
      for (const [status, retryable] of [[500, true], [503, true], [429, true], [400, false], [401, false], [404, false]] as const) {
        const err = await ask(status, stream);
        expect({ status: err.status, retryable: err.retryable }).toEqual({ status, retryable });
        expect(err.message).toContain(`HTTP ${status}`);
        expect(err.message).toContain('Incorrect API key provided: [redacted]');
        expect(err.message).not.toContain(key);
      }
    }
    expect((await ask(429, false)).retryAfterMs).toBe(1000);
  });

  test('no answer within timeoutMs is a retryable LlmError, before the first byte and mid-stream', async () => {
    const slowStart = await fake({ firstByteDelayMs: 2_000 });
    let started = Date.now();
    const before = await llmError(new OpenAiCompatibleModel({ baseUrl: slowStart.url, model: 'm', timeoutMs: 200 }).complete({ messages: USER }));
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(before).toMatchObject({ retryable: true, message: 'The language model did not answer within 200 ms' });

    const slowStream = await fake({ chunkDelayMs: 100, chunkChars: 2, reply: () => ({ text: 'a reply long enough to outlast the deadline' }) });
    const deltas: string[] = [];
    started = Date.now();
    const mid = await llmError(
      new OpenAiCompatibleModel({ baseUrl: slowStream.url, model: 'm', timeoutMs: 400 }).complete({ messages: USER }, (d) => {
        deltas.push(d);
      }),
    );
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(mid).toMatchObject({ retryable: true, message: 'The language model did not answer within 400 ms' });
    expect(deltas.length).toBeGreaterThan(0);
  });

  test("the caller's AbortSignal cancels the call and rejects with the signal's reason", async () => {
    const llm = await fake({ chunkDelayMs: 50, chunkChars: 2, reply: () => ({ text: 'a slow reply that the caller stops' }) });
    const controller = new AbortController();
    const reason = new Error('activity cancelled');
    const p = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' }).complete({ messages: USER, signal: controller.signal }, (d) => {
      if (d) controller.abort(reason);
    });
    await expect(p).rejects.toBe(reason);
  });

  test('an error thrown by onDelta reaches the caller untouched', async () => {
    const llm = await fake({});
    const mine = new Error('socket gone');
    const p = new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' }).complete({ messages: USER }, () => {
      throw mine;
    });
    await expect(p).rejects.toBe(mine);
  });

  test('a stream cut before finish_reason and [DONE] is a retryable error, whether it ends cleanly or is reset', async () => {
    for (const how of ['end', 'reset'] as const) {
      const llm = await fake({ chunkChars: 4, reply: () => ({ text: 'This reply will not arrive whole.', cut: { afterEvents: 3, how } }) });
      const deltas: string[] = [];
      const err = await llmError(
        new OpenAiCompatibleModel({ baseUrl: llm.url, model: 'm' }).complete({ messages: USER }, (d) => {
          deltas.push(d);
        }),
      );
      expect(err.retryable).toBe(true);
      expect(err.status).toBeUndefined();
      if (how === 'end') expect(err.message).toBe('The language model stream ended before the reply was complete');
      else expect(err.message).toContain('The language model connection broke off');
      // What did arrive was delivered, in order.
      expect(deltas).toEqual(['This', ' rep']);
    }
  });

  test('an error reported inside a 200 answer, plain or mid-stream, is a retryable LlmError without the key', async () => {
    const key = 'sk-echoed-key-4242';
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const error = { error: { message: `Quota exceeded for ${key}`, type: 'server_error' } };
        if (!(JSON.parse(raw) as { stream?: boolean }).stream) {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(error));
          return;
        }
        const chunk = { id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: 'Partial' }, finish_reason: null }] };
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`data: ${JSON.stringify(chunk)}\n\ndata: ${JSON.stringify(error)}\n\n`);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const model = new OpenAiCompatibleModel({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, model: 'm', apiKey: key });
      const plain = await llmError(model.complete({ messages: USER }));
      expect(plain).toMatchObject({ retryable: true, message: 'The language model reported an error: Quota exceeded for [redacted]' });
      const deltas: string[] = [];
      const streamed = await llmError(model.complete({ messages: USER }, (d) => void deltas.push(d)));
      expect(streamed).toMatchObject({ retryable: true, status: undefined, message: 'The language model reported an error mid-stream: Quota exceeded for [redacted]' });
      expect(deltas).toEqual(['Partial']);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('an answer that never ends (streamed or not) stops at maxResponseBytes: an LlmError, and the server sees the socket closed', async () => {
    const seen: Array<{ sent: number; closed: boolean; finished: boolean }> = [];
    const server = http.createServer((req, res) => {
      const stats = { sent: 0, closed: false, finished: false };
      seen.push(stats);
      const closed = new Promise((r) => res.on('close', () => r((stats.closed = true))));
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const event = Buffer.from(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'la '.repeat(300) } }] })}\n\n`);
      void (async () => {
        // 100 MB: enough to tell a cap from none (the assertion below is 32 MB), light enough to run without one.
        while (!stats.closed && stats.sent < 100 * 1024 * 1024) {
          stats.sent += event.length;
          if (!res.write(event)) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
        }
        if (!stats.closed) res.end((stats.finished = true) && '');
      })();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const model = new OpenAiCompatibleModel({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, model: 'm', maxResponseBytes: 1024 * 1024 });
      const streamed = await llmError(model.complete({ messages: USER }, () => undefined));
      expect(streamed.message).toMatch(/larger than 1048576 bytes/);
      const plain = await llmError(model.complete({ messages: USER }));
      expect(plain.message).toMatch(/larger than 1048576 bytes/);
      // The server hears each socket close a moment later (longer on a busy machine): waited for, up to 5 s.
      for (let waited = 0; waited < 5_000 && !(seen.length === 2 && seen.every((s) => s.closed)); waited += 20) await new Promise((r) => setTimeout(r, 20));
      expect(seen).toHaveLength(2);
      for (const s of seen) {
        expect(s).toMatchObject({ closed: true, finished: false });
        expect(s.sent).toBeLessThan(32 * 1024 * 1024);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('a refused connection is a retryable LlmError', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const { port } = closed.address() as AddressInfo;
    await new Promise((r) => closed.close(r));
    const err = await llmError(new OpenAiCompatibleModel({ baseUrl: `http://127.0.0.1:${port}`, model: 'm' }).complete({ messages: USER }));
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/^The language model could not be reached: .*ECONNREFUSED/);
  });
});
