import fs from 'node:fs';
import nodeModule from 'node:module';
import path from 'node:path';
import vm from 'node:vm';
import type { PreTrainedModel, PreTrainedTokenizer, Tensor } from '@huggingface/transformers';
import type OpenAI from 'openai';
import { classifyOpenAiError, openAiBaseUrl, openAiClient, withDeadline, withRetries, type RetryOptions } from '../llm/openai';
import { EmbedderError, type Embedder } from '../../domain/ports/embedder';
export { queryVector, passageVectors, EmbedderError, dot, type Embedder } from '../../domain/ports/embedder';

function l2Normalize(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  const n = Math.sqrt(s);
  if (n > 0) for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}

// ---------------------------------------------------------------------------------------
// Local: @huggingface/transformers + onnxruntime-node

interface LocalModelSpec {
  dimension: number;
  /** ONNX variant: 'q8' loads onnx/model_quantized.onnx, 'fp32' loads onnx/model.onnx. */
  dtype: 'q8' | 'fp32';
  /** Longest input in word pieces, [CLS] and [SEP] included; longer texts are truncated. */
  maxTokens: number;
  queryPrefix: string;
  passagePrefix: string;
}

/**
 * Models whose settings are known. Only the first can be had offline here (scripts/
 * fetch-models.ts); the others load when the hub is reachable and
 * CONCIERGE_MODELS_ALLOW_REMOTE=1.
 */
export const LOCAL_MODELS: Record<string, LocalModelSpec> = {
  // sentence-transformers' max_seq_length for this model is 256.
  'Xenova/all-MiniLM-L6-v2': { dimension: 384, dtype: 'q8', maxTokens: 256, queryPrefix: '', passagePrefix: '' },
  'Xenova/bge-small-en-v1.5': {
    dimension: 384,
    dtype: 'q8',
    maxTokens: 512,
    queryPrefix: 'Represent this sentence for searching relevant passages: ',
    passagePrefix: '',
  },
  'Xenova/bge-base-en-v1.5': {
    dimension: 768,
    dtype: 'q8',
    maxTokens: 512,
    queryPrefix: 'Represent this sentence for searching relevant passages: ',
    passagePrefix: '',
  },
  'Xenova/e5-small-v2': { dimension: 384, dtype: 'q8', maxTokens: 512, queryPrefix: 'query: ', passagePrefix: 'passage: ' },
};

export const DEFAULT_LOCAL_MODEL = 'Xenova/all-MiniLM-L6-v2';

/** Other names accepted for the models above. */
const LOCAL_ALIASES: Record<string, string> = {
  'all-MiniLM-L6-v2': 'Xenova/all-MiniLM-L6-v2',
  'sentence-transformers/all-MiniLM-L6-v2': 'Xenova/all-MiniLM-L6-v2',
  'bge-small-en-v1.5': 'Xenova/bge-small-en-v1.5',
  'BAAI/bge-small-en-v1.5': 'Xenova/bge-small-en-v1.5',
  'bge-base-en-v1.5': 'Xenova/bge-base-en-v1.5',
  'BAAI/bge-base-en-v1.5': 'Xenova/bge-base-en-v1.5',
};

const DEFAULT_SPEC: LocalModelSpec = { dimension: 0, dtype: 'q8', maxTokens: 512, queryPrefix: '', passagePrefix: '' };

export interface LocalEmbedderOptions {
  /** Directory holding `<model-id>/...` (see bin/fetch-models.ts). */
  modelsDir: string;
  /** A model id as on the Hugging Face hub; default Xenova/all-MiniLM-L6-v2. */
  model?: string;
  /** Texts per forward pass at most. Default 32. */
  batchSize?: number;
  /** Padded tokens per forward pass at most (bounds memory and event-loop stalls). Default 1024. */
  maxBatchTokens?: number;
  /** onnxruntime intra-op threads. Default `$CONCIERGE_EMBED_THREADS`, else 1 (see LocalEmbedder). */
  threads?: number;
  /** Fetch missing files from the hub into modelsDir (config: CONCIERGE_MODELS_ALLOW_REMOTE). Default: no. */
  allowRemote?: boolean;
  /** The hub to fetch from when allowRemote (config: HF_ENDPOINT). Default https://huggingface.co. */
  remoteHost?: string;
  /** Overrides for a model not in LOCAL_MODELS (or to change a known one). */
  spec?: Partial<LocalModelSpec>;
}


type Transformers = typeof import('@huggingface/transformers');

/**
 * transformers.js (and with it onnxruntime-node) is loaded by Node's own require in the
 * main realm, whatever module system loaded this file. Under Jest, test code and the
 * modules it imports run in a separate vm realm with its own Float32Array, and
 * onnxruntime-common there rejects the arrays onnxruntime-node's native binding creates
 * in the main realm ("A float32 tensor's data must be type of function Float32Array()").
 * Jest also substitutes its own `node:module` and `process`, so the real ones are taken
 * from the main realm's global. Outside a sandbox this is plain `require`. Vectors are
 * copied into this realm's Float32Arrays before they are returned.
 */
function mainRealmRequire(): NodeJS.Require {
  const mainProcess = vm.runInThisContext('process') as NodeJS.Process;
  const mod = (mainProcess.getBuiltinModule?.('node:module') as typeof nodeModule | undefined) ?? nodeModule;
  return mod.createRequire(__filename);
}

let transformers: Transformers | undefined;
const loadTransformers = () => (transformers ??= mainRealmRequire()('@huggingface/transformers') as Transformers);

interface Loaded {
  tf: Transformers;
  tokenizer: PreTrainedTokenizer;
  model: PreTrainedModel;
}

/**
 * all-MiniLM-L6-v2 (or another BERT-style sentence encoder) run in-process on
 * onnxruntime: tokenise, forward pass, mean pooling over the attention mask, L2
 * normalisation — what sentence-transformers does for these models.
 *
 * Loads lazily on the first call, once. Offline by default: the files must be under
 * `modelsDir` (`npm run models:fetch`). With `allowRemote` the same code downloads
 * missing files from the hub into `modelsDir` and uses them from there afterwards.
 *
 * Threads: one intra-op thread by default. On a 2-core machine a second thread gives
 * at best ~1.7x on an idle machine and nothing under load, while the API, the Temporal
 * worker and PostgreSQL share the same two cores; raise it with `threads` or
 * CONCIERGE_EMBED_THREADS for a dedicated ingestion process.
 *
 * onnxruntime-node runs a forward pass synchronously on the JS thread (its async `run`
 * only defers to setImmediate), so each batch stalls the event loop for its duration:
 * ~5-10 ms for one query, up to ~0.25 s for a full batch (maxBatchTokens 1024, one
 * thread). Calls are serialised per instance.
 */
export class LocalEmbedder implements Embedder {
  readonly modelId: string;
  readonly modelsDir: string;
  readonly batchSize: number;
  readonly maxBatchTokens: number;
  readonly threads: number;
  readonly allowRemote: boolean;
  readonly remoteHost: string;
  private readonly spec: LocalModelSpec;
  private loading: Promise<Loaded> | null = null;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(opts: LocalEmbedderOptions) {
    const model = opts.model?.trim() || DEFAULT_LOCAL_MODEL;
    this.modelId = LOCAL_ALIASES[model] ?? model;
    this.modelsDir = path.resolve(opts.modelsDir);
    this.batchSize = opts.batchSize ?? 32;
    this.maxBatchTokens = opts.maxBatchTokens ?? 1024;
    // Settings come from the config module (embedderFromConfig), never from process.env here.
    this.threads = opts.threads ?? 1;
    this.allowRemote = opts.allowRemote ?? false;
    this.remoteHost = (opts.remoteHost?.trim() || 'https://huggingface.co').replace(/\/*$/, '/');
    const known = LOCAL_MODELS[this.modelId];
    if (!known && !opts.spec?.dimension) {
      throw new EmbedderError(`Unknown local model '${this.modelId}': pass spec.dimension (known: ${Object.keys(LOCAL_MODELS).join(', ')})`);
    }
    this.spec = { ...DEFAULT_SPEC, ...known, ...opts.spec };
    if (!(this.batchSize > 0)) throw new EmbedderError('batchSize must be positive');
  }

  get dimension(): number {
    return this.spec.dimension;
  }

  /** Loads the model now (it otherwise loads on the first call). */
  async load(): Promise<void> {
    await this.loaded();
  }

  embed(texts: string[]): Promise<Float32Array[]> {
    return this.run(texts);
  }

  async embedQuery(text: string): Promise<Float32Array> {
    const [v] = await this.run([this.spec.queryPrefix + text]);
    return v;
  }

  embedPassages(texts: string[]): Promise<Float32Array[]> {
    const p = this.spec.passagePrefix;
    return this.run(p ? texts.map((t) => p + t) : texts);
  }

  /** Frees the onnxruntime session. The next call loads it again. */
  async dispose(): Promise<void> {
    const loading = this.loading;
    this.loading = null;
    if (!loading) return;
    try {
      await (await loading).model.dispose();
    } catch {
      // never loaded, or already gone
    }
  }

  private run(texts: string[]): Promise<Float32Array[]> {
    const next = this.queue.then(() => this.embedAll(texts));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async embedAll(texts: string[]): Promise<Float32Array[]> {
    if (texts.length === 0) return [];
    const { tf, tokenizer, model } = await this.loaded();
    const out = new Array<Float32Array>(texts.length);
    for (const idx of this.batches(tokenizer, texts)) {
      const inputs = tokenizer(
        idx.map((i) => texts[i]),
        { padding: true, truncation: true, max_length: this.spec.maxTokens },
      );
      const outputs = (await model(inputs)) as Record<string, Tensor | undefined>;
      const hidden = outputs.last_hidden_state ?? outputs.token_embeddings;
      if (!hidden) throw new EmbedderError(`${this.modelId}: the model has no last_hidden_state output`);
      const pooled = tf.mean_pooling(hidden, inputs.attention_mask as Tensor);
      const [rows, dim] = pooled.dims;
      if (dim !== this.spec.dimension) throw new EmbedderError(`${this.modelId}: vectors have ${dim} dimensions, expected ${this.spec.dimension}`);
      const data = pooled.data as Float32Array;
      for (let r = 0; r < rows; r++) {
        const v = new Float32Array(dim); // this realm's Float32Array (see mainRealmRequire)
        v.set(data.subarray(r * dim, (r + 1) * dim));
        out[idx[r]] = l2Normalize(v);
      }
      for (const t of Object.values(outputs)) t?.dispose();
      pooled.dispose();
    }
    return out;
  }

  /**
   * Groups the texts longest first, so each batch pads to texts of similar length, and
   * closes a batch at `batchSize` texts or `maxBatchTokens` padded tokens. Throughput
   * does not improve past a few thousand tokens a batch, while the event-loop stall
   * grows with the batch and onnxruntime's memory arena with the largest batch it has
   * seen (process RSS ~0.5 GB at 4 x 256 tokens, ~1.4 GB at 32 x 256).
   */
  private batches(tokenizer: PreTrainedTokenizer, texts: string[]): number[][] {
    const max = this.spec.maxTokens;
    const lengths = texts.map((t) => Math.min(max, tokenizer.encode(t).length));
    const order = texts.map((_, i) => i).sort((a, b) => lengths[b] - lengths[a]);
    const batches: number[][] = [];
    let current: number[] = [];
    for (const i of order) {
      // Sorted longest first: the batch's first text sets its padded length.
      const padded = current.length ? lengths[current[0]] : lengths[i];
      if (current.length && (current.length >= this.batchSize || (current.length + 1) * padded > this.maxBatchTokens)) {
        batches.push(current);
        current = [];
      }
      current.push(i);
    }
    if (current.length) batches.push(current);
    return batches;
  }

  private loaded(): Promise<Loaded> {
    if (!this.loading) {
      this.loading = this.doLoad();
      this.loading.catch(() => {
        this.loading = null; // a later call may try again (e.g. after models:fetch)
      });
    }
    return this.loading;
  }

  private async doLoad(): Promise<Loaded> {
    const dir = path.join(this.modelsDir, this.modelId);
    const onnx = path.join(dir, 'onnx', this.spec.dtype === 'q8' ? 'model_quantized.onnx' : 'model.onnx');
    const required = [onnx, path.join(dir, 'tokenizer.json'), path.join(dir, 'config.json')];
    const missing = required.filter((f) => !fs.existsSync(f));
    if (missing.length && !this.allowRemote) {
      throw new EmbedderError(
        `Embedding model ${this.modelId} is not in ${this.modelsDir} (missing ${missing.map((f) => path.relative(this.modelsDir, f)).join(', ')}). ` +
          'Run `npm run models:fetch` (CONCIERGE_MODELS_DIR sets the directory), or set CONCIERGE_MODELS_ALLOW_REMOTE=1 to download it from the Hugging Face hub.',
      );
    }
    const tf = loadTransformers();
    // Process-wide settings of transformers.js: every LocalEmbedder sets them before it loads.
    tf.env.allowLocalModels = true;
    tf.env.localModelPath = this.modelsDir;
    tf.env.allowRemoteModels = this.allowRemote;
    tf.env.remoteHost = this.remoteHost;
    tf.env.useFSCache = true;
    tf.env.cacheDir = this.modelsDir; // downloads land as <modelsDir>/<model-id>/<file>, the layout read above
    tf.env.logLevel = tf.LogLevel.ERROR;
    const common = { local_files_only: !this.allowRemote, cache_dir: this.modelsDir };
    try {
      const [tokenizer, model] = await Promise.all([
        tf.AutoTokenizer.from_pretrained(this.modelId, common),
        tf.AutoModel.from_pretrained(this.modelId, {
          ...common,
          dtype: this.spec.dtype,
          device: 'cpu',
          session_options: { intraOpNumThreads: this.threads, interOpNumThreads: 1 },
        }),
      ]);
      return { tf, tokenizer, model };
    } catch (err) {
      throw new EmbedderError(`Could not load embedding model ${this.modelId} from ${this.modelsDir}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------
// OpenAI-compatible HTTP API

/** Dimensions of OpenAI's embedding models at their default size. */
export const OPENAI_MODELS: Record<string, number> = {
  'text-embedding-3-small': 1536,
  'text-embedding-3-large': 3072,
  'text-embedding-ada-002': 1536,
};

export interface OpenAiEmbedderOptions {
  /** Server root, e.g. https://api.openai.com (a trailing /v1 is accepted too). */
  baseUrl?: string;
  apiKey?: string;
  model?: string;
  /** Ask text-embedding-3 models for shorter vectors (sent as `dimensions`). */
  dimensions?: number;
  /** Inputs per request. Default 64. */
  batchSize?: number;
  /** Per request, in milliseconds. Default 30 000. */
  timeoutMs?: number;
  /** Further attempts after a retryable failure (providers/llm/openai's classifier: 408, 409, 429, 5xx, network errors, time-outs). Default 2. */
  maxRetries?: number;
  /** First wait before a retry, doubled each time (a Retry-After header wins). Default 500 ms. */
  retryDelayMs?: number;
}

interface EmbeddingsResponse {
  data?: Array<{ index?: number; embedding?: unknown }>;
}

/**
 * `POST {baseUrl}/v1/embeddings` with `{ model, input: string[] }` and a bearer key, through
 * the shared SDK client (providers/llm/openai): OpenAI or any server speaking its API (vLLM,
 * llama.cpp server, Ollama, LocalAI, ...). Results are put back in input order by `index`
 * and L2-normalised (OpenAI's already are, other servers' may not be).
 *
 * Retries in process (`maxRetries`, by the shared classifier), unlike chat and
 * transcription: a search query is embedded on the API's search path and in a chat turn's
 * retrieval, which reports a failure as "no results" rather than failing the activity, so
 * Temporal never retries it; a short retry there rides out a 429 or a blip.
 */
export class OpenAiEmbedder implements Embedder {
  readonly modelId: string;
  readonly url: string;
  private readonly client: OpenAI;
  private readonly apiKey: string | undefined;
  private readonly requestedDimensions: number | undefined;
  private readonly batchSize: number;
  private readonly timeoutMs: number;
  private readonly retries: RetryOptions;
  private dim: number;

  constructor(opts: OpenAiEmbedderOptions = {}) {
    this.modelId = opts.model?.trim() || 'text-embedding-3-small';
    const baseUrl = opts.baseUrl ?? 'https://api.openai.com';
    this.url = `${openAiBaseUrl(baseUrl)}/embeddings`;
    this.apiKey = opts.apiKey;
    this.requestedDimensions = opts.dimensions;
    this.batchSize = opts.batchSize ?? 64;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.retries = { maxRetries: opts.maxRetries ?? 2, baseDelayMs: opts.retryDelayMs ?? 500 };
    this.dim = opts.dimensions ?? OPENAI_MODELS[this.modelId] ?? 0;
    if (!(this.batchSize > 0)) throw new EmbedderError('batchSize must be positive');
    this.client = openAiClient({ baseUrl, apiKey: opts.apiKey, timeoutMs: this.timeoutMs });
  }

  get dimension(): number {
    return this.dim;
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += this.batchSize) out.push(...(await this.request(texts.slice(i, i + this.batchSize))));
    return out;
  }

  async embedQuery(text: string): Promise<Float32Array> {
    const [v] = await this.embed([text]);
    return v;
  }

  embedPassages(texts: string[]): Promise<Float32Array[]> {
    return this.embed(texts);
  }

  private async request(input: string[]): Promise<Float32Array[]> {
    let json: unknown;
    try {
      json = await withRetries(
        () =>
          withDeadline(this.timeoutMs, (signal) =>
            this.client.embeddings.create(
              {
                model: this.modelId,
                input,
                // Plain arrays: without it the SDK asks for base64, which not every compatible server speaks.
                encoding_format: 'float',
                ...(this.requestedDimensions ? { dimensions: this.requestedDimensions } : {}),
              },
              { signal },
            ),
          ),
        this.retries,
      );
    } catch (err) {
      const f = classifyOpenAiError(err, this.apiKey);
      const why = f.kind === 'status' ? `HTTP ${f.status}${f.detail ? `: ${f.detail}` : ''}` : f.kind === 'timeout' ? `timed out after ${this.timeoutMs} ms` : f.detail;
      throw new EmbedderError(`Embeddings request to ${this.url} failed: ${why}`);
    }
    return this.parse(json as EmbeddingsResponse | null, input.length);
  }

  private parse(json: EmbeddingsResponse | null, expected: number): Float32Array[] {
    const data = json?.data;
    if (!Array.isArray(data) || data.length !== expected) {
      throw new EmbedderError(`Embeddings response from ${this.url}: expected ${expected} embeddings in "data", got ${Array.isArray(data) ? data.length : 'none'}`);
    }
    const out = new Array<Float32Array>(expected);
    data.forEach((d, pos) => {
      const i = typeof d.index === 'number' ? d.index : pos;
      if (!Array.isArray(d.embedding) || i < 0 || i >= expected || out[i]) {
        throw new EmbedderError(`Embeddings response from ${this.url}: malformed item ${pos}`);
      }
      const v = l2Normalize(Float32Array.from(d.embedding as number[]));
      if (this.dim === 0) this.dim = v.length;
      if (v.length !== this.dim) throw new EmbedderError(`Embeddings response from ${this.url}: vector of ${v.length} dimensions, expected ${this.dim}`);
      out[i] = v;
    });
    return out;
  }
}

// ---------------------------------------------------------------------------------------

export interface EmbedderConfig {
  provider: 'local' | 'openai';
  modelsDir: string;
  model?: string;
  baseUrl?: string;
  apiKey?: string;
  /** OpenAI: `dimensions` for text-embedding-3 models. */
  dimensions?: number;
  batchSize?: number;
  /** Local: onnxruntime intra-op threads. */
  threads?: number;
  /** Local: fetch a missing model from `remoteHost`. */
  allowRemote?: boolean;
  remoteHost?: string;
  /** OpenAI: per-request time-out in milliseconds. */
  timeoutMs?: number;
}

export function createEmbedder(cfg: EmbedderConfig): Embedder {
  switch (cfg.provider) {
    case 'local':
      return new LocalEmbedder({
        modelsDir: cfg.modelsDir,
        model: cfg.model,
        batchSize: cfg.batchSize,
        threads: cfg.threads,
        allowRemote: cfg.allowRemote,
        remoteHost: cfg.remoteHost,
      });
    case 'openai':
      return new OpenAiEmbedder({
        baseUrl: cfg.baseUrl,
        apiKey: cfg.apiKey,
        model: cfg.model,
        dimensions: cfg.dimensions,
        batchSize: cfg.batchSize,
        timeoutMs: cfg.timeoutMs,
      });
    default:
      throw new EmbedderError(`Unknown embedding provider '${(cfg as { provider: string }).provider}' (expected local or openai)`);
  }
}
