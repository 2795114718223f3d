import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { classifyOpenAiError, openAiClient, withRetries, type OpenAiFailure } from '../../providers/llm/openai';

/**
 * The shared client and its one classifier, against a loopback server that answers
 * whatever status, headers and body a test scripts, the way OpenAI-compatible servers do.
 */
interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}
interface Seen {
  url: string;
  headers: http.IncomingHttpHeaders;
}

let server: http.Server;
let baseUrl: string;
let seen: Seen[];
let answers: Answer[];

const okEmbedding = { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: [1, 0] }] }) };
const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({ status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      const a = answers.shift() ?? okEmbedding;
      res.writeHead(a.status, a.headers ?? {}).end(a.body ?? '');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
beforeEach(() => {
  seen = [];
  answers = [];
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const embed = (apiKey?: string) => openAiClient({ baseUrl, apiKey, timeoutMs: 5_000 }).embeddings.create({ model: 'm', input: ['x'], encoding_format: 'float' });

/** The classification of the failure of one embeddings call answered by `a`. */
async function failureOf(a: Answer, apiKey?: string): Promise<OpenAiFailure> {
  answers = [a];
  try {
    await embed(apiKey);
  } catch (err) {
    return classifyOpenAiError(err, apiKey);
  }
  throw new Error('expected the call to fail');
}

describe('classifyOpenAiError', () => {
  test('408, 409, 429 and 5xx are retryable; other 4xx are final; the status and the server message are kept', async () => {
    for (const [status, retryable] of [[408, true], [409, true], [429, true], [500, true], [502, true], [400, false], [401, false], [403, false], [404, false], [422, false]] as const) {
      const f = await failureOf(json(status, { error: { message: `because ${status}`, type: 'x' } }));
      expect({ status, f }).toEqual({ status, f: { retryable, kind: 'status', status, detail: `because ${status}` } });
    }
  });

  test("the server's x-should-retry header overrides the status", async () => {
    expect(await failureOf(json(400, { error: { message: 'try later' } }, { 'x-should-retry': 'true' }))).toMatchObject({ retryable: true, status: 400 });
    expect(await failureOf(json(503, { error: { message: 'gone for good' } }, { 'x-should-retry': 'false' }))).toMatchObject({ retryable: false, status: 503 });
  });

  test('Retry-After in seconds, as an HTTP date, and retry-after-ms become a hint in milliseconds', async () => {
    expect((await failureOf(json(429, { error: { message: 'slow down' } }, { 'retry-after': '3' }))).retryAfterMs).toBe(3000);
    expect((await failureOf(json(429, { error: { message: 'slow down' } }, { 'retry-after-ms': '250', 'retry-after': '3' }))).retryAfterMs).toBe(250);
    const date = (await failureOf(json(503, { error: { message: 'down' } }, { 'retry-after': new Date(Date.now() + 20_000).toUTCString() }))).retryAfterMs;
    expect(date).toBeGreaterThan(15_000);
    expect(date).toBeLessThanOrEqual(20_000);
    // A final failure carries no hint: there is no next attempt.
    expect((await failureOf(json(400, { error: { message: 'bad' } }, { 'retry-after': '3' }))).retryAfterMs).toBeUndefined();
  });

  test('error bodies: a string error, text that is not JSON, no body at all', async () => {
    expect((await failureOf(json(503, { error: 'busy' }))).detail).toBe('busy');
    expect((await failureOf({ status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>Bad   gateway</h1>\n' })).detail).toBe('<h1>Bad gateway</h1>');
    expect(await failureOf({ status: 500 })).toEqual({ retryable: true, kind: 'status', status: 500, detail: '' });
  });

  test('the API key is redacted from what the server echoes', async () => {
    const key = 'sk-live-abcdef123456';
    const f = await failureOf(json(401, { error: { message: `Incorrect API key provided: ${key}.` } }), key);
    expect(f.detail).toBe('Incorrect API key provided: [redacted].');
  });

  test('a refused connection is a retryable transport failure naming the socket error', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const { port } = closed.address() as AddressInfo;
    await new Promise((r) => closed.close(r));
    const err = await openAiClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 5_000 })
      .embeddings.create({ model: 'm', input: ['x'] })
      .catch((e: unknown) => e);
    expect(classifyOpenAiError(err)).toMatchObject({ retryable: true, kind: 'transport', detail: expect.stringContaining('ECONNREFUSED') });
  });
});

describe('openAiClient', () => {
  test('never retries by itself: one request for a 500 and for a 429', async () => {
    answers = [json(500, { error: { message: 'boom' } })];
    await expect(embed()).rejects.toThrow();
    answers = [json(429, { error: { message: 'slow' } }, { 'retry-after': '0' })];
    await expect(embed()).rejects.toThrow();
    expect(seen).toHaveLength(2);
  });

  test('sends the key as a bearer token; without one, no Authorization, and nothing from OPENAI_* in the environment', async () => {
    const saved = { key: process.env.OPENAI_API_KEY, org: process.env.OPENAI_ORG_ID, project: process.env.OPENAI_PROJECT_ID };
    process.env.OPENAI_API_KEY = 'sk-from-the-environment';
    process.env.OPENAI_ORG_ID = 'org-env';
    process.env.OPENAI_PROJECT_ID = 'proj-env';
    try {
      await embed('sk-configured');
      await embed();
    } finally {
      for (const [name, value] of [['OPENAI_API_KEY', saved.key], ['OPENAI_ORG_ID', saved.org], ['OPENAI_PROJECT_ID', saved.project]] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    expect(seen.map((s) => s.headers.authorization)).toEqual(['Bearer sk-configured', undefined]);
    for (const s of seen) {
      expect(s.url).toBe('/v1/embeddings');
      expect(s.headers['openai-organization']).toBeUndefined();
      expect(s.headers['openai-project']).toBeUndefined();
    }
  });
});

describe('withRetries', () => {
  test('retries a retryable failure after its Retry-After, then succeeds', async () => {
    answers = [json(429, { error: { message: 'slow down' } }, { 'retry-after': '1' })];
    const started = Date.now();
    const res = await withRetries(() => embed(), { maxRetries: 2, baseDelayMs: 10 });
    expect(res.data).toHaveLength(1);
    expect(seen).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });

  test('rethrows a final failure at once, and the last retryable one when the retries run out', async () => {
    answers = [json(422, { error: { message: 'bad input' } })];
    await expect(withRetries(() => embed(), { maxRetries: 2, baseDelayMs: 10 })).rejects.toMatchObject({ status: 422 });
    expect(seen).toHaveLength(1);
    seen = [];
    answers = [json(503, { error: { message: 'one' } }), json(502, { error: { message: 'two' } })];
    await expect(withRetries(() => embed(), { maxRetries: 1, baseDelayMs: 10 })).rejects.toMatchObject({ status: 502 });
    expect(seen).toHaveLength(2);
  });
});
