import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { StructuredExtraction, type IStructuredExtraction } from '../../db/entities';
import { DomainError } from '../errors';
import { OperationalError } from '../../lib/failures';
import { newId } from '../../lib/ids';
import { NoTextExtracted, sniffType } from '../../lib/extract';
import type { ExtractFn } from '../kb/indexing';
import { LlmError, type ChatModel, type ChatTurnMessage, type CompletionRequest, type CompletionResult, type LlmSettings, type ModelFactory } from '../ports/llm';
import type { BlobStore, StagedBlob } from '../ports/blob-store';
import type { UsageRecordRepository } from '../billing/usage-records';
import { chunkText, mergeCandidates } from './merge';
import { compileUserSchema, describeErrors, parseUserSchema, type UserSchema } from './schema';
import { SchemaValidator, type ValidationResult } from './validate-thread';

/**
 * Structured extraction: a document and a JSON Schema in, the document's content shaped
 * to the schema out, `data` always validated by ajv first. The API half (`begin`,
 * `answer`) checks the request and finds a stored result; the worker half (`readText`,
 * `answerChunk`, `finish`, `fail`) is the steps of the `extract:ext_…` workflow. This
 * module alone reads and writes `structured_extractions`.
 */

/** The types the endpoint accepts (the contract's list); anything else is 415 unsupported_mime. */
const ACCEPTED = new Set(['application/pdf', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'text/plain', 'image/png', 'image/jpeg', 'image/webp']);
/** Longest `prompt` accepted. */
export const MAX_PROMPT_CHARS = 4_000;
/** Largest file accepted (the widget's and OpenAI's file cap). */
export const EXTRACT_MAX_BYTES = 25 * 1024 * 1024;
/** Output tokens one model call may use. */
const MAX_OUTPUT_TOKENS = 2_048;

/** A model server this process runs itself (providers/llm/local-server.ts), started when a call needs it. */
export interface LocalModel {
  readonly modelName: string;
  use<T>(call: (baseUrl: string) => Promise<T>): Promise<T>;
}

export interface StructuredSettings {
  /** The extraction model of a provider; null: none (then `local`, else 503 llm_not_configured). */
  llm: LlmSettings | null;
  /** The embedded local model, used when `llm` is null. */
  local?: LocalModel | null;
  /** Deadline of one call to the local model. */
  localTimeoutMs?: number;
  /** Characters of text per model call (STRUCTURED_CHUNK_CHARS). */
  chunkChars: number;
  /** Most chunks per document (STRUCTURED_MAX_CHUNKS). */
  maxChunks: number;
  /** Deadline of one validation of model answers against the caller's schema (STRUCTURED_VALIDATION_TIMEOUT_MS); past it: 422 extraction_failed. */
  validationTimeoutMs?: number;
}

export const DEFAULT_STRUCTURED: Omit<StructuredSettings, 'llm'> = { chunkChars: 12_000, maxChunks: 20 };

/** The endpoint's 200 answer. */
export interface ExtractionAnswer {
  data: unknown;
  model: string;
}

/** What `begin` decided: the stored answer, or a workflow to start (or join). */
export type Begun =
  | { kind: 'stored'; answer: ExtractionAnswer }
  | { kind: 'run'; id: string; workspaceId: string; fileSha256: string; fileName: string; mimeType: string; size: number };

/** How a failed extraction is answered: failure kind → status and code. */
export type FailureKind = 'unreadable' | 'no_valid_output' | 'model' | 'internal';

/** How the workflow ended (its result); the answer itself is read from the row. */
export type ExtractionOutcome = { status: 'succeeded' } | { status: 'failed'; failure: FailureKind; reason: string };

/** One chunk's answer, as the workflow hands it to `finish`. */
export interface ChunkAnswer {
  index: number;
  /** Valid against the schema; null when neither the first answer nor the repair was. */
  data: unknown;
  /** Why the last answer did not validate (when data is null). */
  errors: string[];
  promptTokens: number;
  completionTokens: number;
  calls: number;
}

/** The model answered nothing usable for any chunk, or the file has no text: final, not retried. */
export class ExtractionRefused extends OperationalError {
  constructor(reason: string) {
    super('ExtractionRefused', reason, false);
  }
}

function failureAnswer(failure: string | null | undefined, message: string | null | undefined): DomainError {
  const reason = message ?? 'the extraction failed';
  switch (failure) {
    case 'unreadable':
    case 'no_valid_output':
      return new DomainError('extraction_failed', reason);
    case 'model':
      return new DomainError('model_unavailable', `The extraction model failed: ${reason}`);
    default:
      return new DomainError('internal_error', 'The extraction failed (internal error)');
  }
}

const SYSTEM_PROMPT = [
  'You extract data from a document into JSON.',
  'Answer with one JSON object that matches the JSON Schema you are given, and nothing else.',
  'Use only what the document states. Copy values as they are written (names, numbers, dates) unless the schema asks for another form.',
  'When the document does not state a value: use null if the schema allows it, otherwise an empty string, 0, false or an empty array. Never invent values.',
].join(' ');

/** The model's text as JSON: a code fence around it is tolerated. */
function parseAnswer(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  const body = text.trim().replace(/^```(?:json)?\s*/i, '').replace(/\s*```$/, '');
  try {
    return { ok: true, value: JSON.parse(body) };
  } catch (err) {
    return { ok: false, error: `/: not valid JSON (${(err as Error).message})` };
  }
}

/**
 * One part of a document asked of the model: the schema as `response_format: json_schema`
 * (strict when the schema allows it) and in the prompt, the answer parsed and validated
 * by ajv; when it does not validate, one repair turn quoting ajv's errors. Model failures
 * throw (LlmError); an answer still invalid after the repair is data null with the errors.
 * Shared by the workflow's step and the benchmark.
 */
export async function askModel(
  complete: (req: CompletionRequest) => Promise<CompletionResult>,
  schema: UserSchema,
  input: { text: string; prompt: string | null; part?: { index: number; count: number } },
  signal?: AbortSignal,
  /** Validates an answer; the service's runs in a thread with a deadline, the default here (the benchmark) in this one. */
  check: (value: unknown) => Promise<ValidationResult> = async (value) => ({ valid: schema.validate(value) as boolean, errors: describeErrors(schema.validate.errors) }),
): Promise<Omit<ChunkAnswer, 'index'>> {
  const where = input.part ? ` (part ${input.part.index + 1} of ${input.part.count}; answer from this part only)` : '';
  const messages: ChatTurnMessage[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    {
      role: 'user',
      content: [`JSON Schema of the answer:\n${JSON.stringify(schema.schema)}`, input.prompt ? `Instructions: ${input.prompt}` : '', `Document${where}:\n"""\n${input.text}\n"""`]
        .filter(Boolean)
        .join('\n\n'),
    },
  ];
  const out: Omit<ChunkAnswer, 'index'> = { data: null, errors: [], promptTokens: 0, completionTokens: 0, calls: 0 };
  let format: CompletionRequest['response_format'] = { type: 'json_schema', json_schema: { name: 'extraction', schema: schema.schema, strict: schema.strict } };
  for (let attempt = 0; attempt < 2; attempt++) {
    let result: CompletionResult;
    try {
      result = await complete({ messages, temperature: 0, max_tokens: MAX_OUTPUT_TOKENS, response_format: format, signal });
    } catch (err) {
      // A server without structured outputs refuses the json_schema format (400 naming it):
      // ask in JSON mode instead; the schema is in the prompt and ajv still decides.
      if (!(err instanceof LlmError && err.status === 400 && format.type === 'json_schema' && /response_format|json_schema/i.test(err.message))) throw err;
      format = { type: 'json_object' };
      result = await complete({ messages, temperature: 0, max_tokens: MAX_OUTPUT_TOKENS, response_format: format, signal });
    }
    out.calls++;
    out.promptTokens += result.usage?.prompt_tokens ?? 0;
    out.completionTokens += result.usage?.completion_tokens ?? 0;
    const parsed = parseAnswer(result.text);
    const checked = parsed.ok ? await check(parsed.value) : { valid: false, errors: [parsed.error] };
    if (parsed.ok && checked.valid) {
      out.data = parsed.value;
      out.errors = [];
      return out;
    }
    out.errors = checked.errors;
    // The repair turn: the model sees its answer and what is wrong with it.
    messages.push(
      { role: 'assistant', content: result.text },
      { role: 'user', content: `That answer does not match the JSON Schema:\n${out.errors.map((e) => `- ${e}`).join('\n')}\nAnswer again with the corrected JSON object only.` },
    );
  }
  return out;
}

export class StructuredExtractionService {
  /** A blob owner kind (BlobRefRepository): how many running extractions read these bytes (a finished one keeps its text, not its bytes). */
  static blobUses(em: EntityManager, sha256: string): Promise<number> {
    return em.count(StructuredExtraction, { blobKey: sha256, status: 'running' });
  }

  private readonly model: ChatModel | null;
  /** Model answers are validated against callers' schemas only here: in threads, with a deadline. */
  readonly validator: SchemaValidator;

  constructor(
    private readonly deps: {
      em: EntityManager;
      /** A succeeded extraction is counted (usage_records) through it. */
      usage: Pick<UsageRecordRepository, 'recordExtractionUsage'>;
      blobs: BlobStore;
      extract: ExtractFn;
      settings: StructuredSettings;
      /** Opens the model at an endpoint (app/services.ts: the OpenAI-compatible one). */
      openModel: ModelFactory;
    },
  ) {
    this.model = deps.settings.llm ? deps.openModel(deps.settings.llm) : null;
    this.validator = new SchemaValidator({ timeoutMs: deps.settings.validationTimeoutMs });
  }

  /** Stops the validation threads (the process is closing). */
  close(): Promise<void> {
    return this.validator.close();
  }

  private em(): EntityManager {
    return this.deps.em.fork();
  }

  /** Whether a model is configured (else the endpoint answers 503 llm_not_configured). */
  get configured(): boolean {
    return this.model !== null || Boolean(this.deps.settings.local);
  }

  get modelName(): string {
    return this.deps.settings.llm?.model ?? this.deps.settings.local?.modelName ?? '';
  }

  /** One chat completion from the provider, or from the local server (started if need be). */
  private complete(req: CompletionRequest): Promise<CompletionResult> {
    if (this.model) return this.model.complete(req);
    const local = this.deps.settings.local;
    if (!local) throw new ExtractionRefused('no extraction model is configured');
    return local.use((baseUrl) => {
      if (this.localClient?.baseUrl !== baseUrl) {
        this.localClient = { baseUrl, model: this.deps.openModel({ baseUrl, model: local.modelName, timeoutMs: this.deps.settings.localTimeoutMs ?? 180_000 }) };
      }
      return this.localClient.model.complete(req);
    });
  }

  private localClient: { baseUrl: string; model: ChatModel } | null = null;

  /**
   * The API's half: checks the request (schema, prompt, file type; the staged file is the
   * caller's until this returns or throws, and is committed or discarded here), then
   * answers from the stored result of the same request in this workspace, or records the
   * request so its workflow can run. A request that failed before runs again.
   */
  async begin(workspaceId: string, input: { staged: StagedBlob; fileName: string; schema: string | undefined; prompt: string | undefined }): Promise<Begun> {
    const { staged } = input;
    let committed = false;
    try {
      const schema = parseUserSchema(input.schema);
      const prompt = input.prompt?.trim() || null;
      if (prompt && prompt.length > MAX_PROMPT_CHARS) throw new DomainError('invalid_request', `prompt: at most ${MAX_PROMPT_CHARS} characters`);
      if (staged.size === 0) throw new DomainError('invalid_request', 'file: is empty');
      const fileName = input.fileName.trim().slice(0, 255) || 'document';
      const type = await sniffType(staged.tempPath, fileName);
      if (!type || !ACCEPTED.has(type.mime)) {
        throw new DomainError('unsupported_mime', `file: '${fileName}' is not a PDF, DOCX, TXT, PNG, JPEG or WEBP file${type ? ` (it is ${type.mime})` : ''}`);
      }
      if (!this.configured) throw new DomainError('llm_not_configured', 'No extraction model is configured: set STRUCTURED_BASE_URL (or LLM_BASE_URL)');

      const requestHash = createHash('sha256').update(`${staged.sha256}\n${schema.hash}\n${prompt ?? ''}`).digest('hex');
      const em = this.em();
      await em
        .createQueryBuilder(StructuredExtraction)
        .insert({
          id: newId('ext'),
          workspaceId,
          requestHash,
          blobKey: staged.sha256,
          fileName,
          mimeType: type.mime,
          kind: type.kind,
          schema: schema.schema,
          prompt,
          status: 'running',
        })
        .onConflict(['workspaceId', 'requestHash'])
        .ignore();
      const row = await em.findOneOrFail(StructuredExtraction, { workspaceId, requestHash });
      if (row.status === 'succeeded') return { kind: 'stored', answer: { data: row.data, model: row.model ?? this.modelName } };
      // Bytes before the run: its first step reads them.
      await this.deps.blobs.commit(staged);
      committed = true;
      if (row.status === 'failed') {
        // Another try of a request that failed (a model outage, a bad answer): from the start.
        await em.nativeUpdate(
          StructuredExtraction,
          { id: row.id, status: 'failed' },
          { status: 'running', text: null, chunkCount: null, pages: null, failure: null, errorMessage: null, data: null, model: null, promptTokens: 0, completionTokens: 0, modelCalls: 0, updatedAt: new Date() },
        );
      }
      return { kind: 'run', id: row.id, workspaceId, fileSha256: staged.sha256, fileName, mimeType: type.mime, size: staged.size };
    } finally {
      if (!committed) await this.deps.blobs.discard(staged);
    }
  }

  /** The answer of a finished extraction of this workspace: 200's body, or the DomainError of its failure. */
  async answer(workspaceId: string, id: string): Promise<ExtractionAnswer> {
    const row = await this.em().findOne(StructuredExtraction, { id, workspaceId });
    if (!row) throw new DomainError('internal_error', 'The extraction record is missing');
    if (row.status === 'succeeded') return { data: row.data, model: row.model ?? this.modelName };
    if (row.status === 'failed') throw failureAnswer(row.failure, row.errorMessage);
    throw new DomainError('internal_error', 'The extraction workflow ended but its record is still running');
  }

  /** Usage of one extraction (billing, tests). */
  async usage(id: string): Promise<Pick<IStructuredExtraction, 'promptTokens' | 'completionTokens' | 'modelCalls' | 'pages' | 'chunkCount' | 'status'> | null> {
    return this.em().findOne(StructuredExtraction, { id }, { fields: ['promptTokens', 'completionTokens', 'modelCalls', 'pages', 'chunkCount', 'status'] });
  }

  private async running(id: string): Promise<IStructuredExtraction> {
    const row = await this.em().findOne(StructuredExtraction, { id });
    if (!row) throw new ExtractionRefused('the extraction record is gone');
    return row;
  }

  /** The row's schema, compiled; one stored before a refusal was added (a lookaround pattern) fails the run for good. */
  private schemaOf(row: IStructuredExtraction): UserSchema {
    try {
      return compileUserSchema(row.schema);
    } catch (err) {
      if (err instanceof DomainError) throw new ExtractionRefused(err.message);
      throw err;
    }
  }

  /**
   * Step 1: the file's text, read in the isolated extraction process (images and scanned
   * pages OCR'd there), stored on the row so retries and later steps do not read it again.
   * Returns the number of chunks. A file with no text, or one that cannot be read, fails
   * for good (ExtractionError, not retried).
   */
  async readText(id: string): Promise<{ chunks: number }> {
    const row = await this.running(id);
    if (row.text !== null && row.text !== undefined && row.chunkCount) return { chunks: row.chunkCount };
    let text: string;
    let pages: number | null;
    try {
      const { segments } = await this.deps.blobs.withLocalFile(row.blobKey, (filePath) => this.deps.extract({ filePath, kind: row.kind, mime: row.mimeType, fileName: row.fileName, owner: { workspaceId: row.workspaceId } }));
      text = segments.map((s) => s.text).join('\n\n');
      const numbered = new Set(segments.map((s) => s.page).filter((p) => p !== undefined));
      pages = numbered.size || (row.kind === 'image' ? 1 : null);
    } catch (err) {
      if (err instanceof NoTextExtracted) throw new ExtractionRefused(row.kind === 'image' ? 'no text was found in the image' : 'no text could be extracted from the file');
      throw err;
    }
    const chunks = chunkText(text, this.deps.settings.chunkChars);
    if (!chunks.length) throw new ExtractionRefused('no text could be extracted from the file');
    if (chunks.length > this.deps.settings.maxChunks) {
      throw new ExtractionRefused(`the document is too long: ${text.length} characters, over the ${this.deps.settings.maxChunks * this.deps.settings.chunkChars} read per extraction`);
    }
    await this.em().nativeUpdate(StructuredExtraction, { id }, { text, chunkCount: chunks.length, pages, updatedAt: new Date() });
    return { chunks: chunks.length };
  }

  /**
   * Step 2, once per chunk: the model's answer for one part of the document, constrained
   * by the schema (`response_format: json_schema`) and validated by ajv; when it does not
   * validate, one repair turn quoting ajv's errors. Model failures (unreachable, 5xx,
   * time-out) throw LlmError, retried by the activity's policy; an answer that is still
   * invalid after the repair is data null with the errors.
   */
  async answerChunk(id: string, index: number, signal?: AbortSignal): Promise<ChunkAnswer> {
    if (!this.configured) throw new ExtractionRefused('no extraction model is configured');
    const row = await this.running(id);
    const chunks = chunkText(row.text ?? '', this.deps.settings.chunkChars);
    const chunk = chunks[index];
    if (chunk === undefined) throw new ExtractionRefused(`chunk ${index} does not exist`);
    const schema = this.schemaOf(row);
    const check = async (value: unknown) => (await this.validator.validate(schema, [value]))[0];
    const answer = await askModel((req) => this.complete(req), schema, { text: chunk, prompt: row.prompt ?? null, part: chunks.length > 1 ? { index, count: chunks.length } : undefined }, signal, check);
    return { index, ...answer };
  }

  /**
   * Step 3: the chunks' answers merged (arrays concatenated, scalars from the
   * best-supported chunk), validated once more, and stored with the usage: succeeded,
   * or failed when no chunk gave a valid answer.
   */
  async finish(id: string, answers: ChunkAnswer[]): Promise<ExtractionOutcome> {
    const row = await this.running(id);
    if (row.status !== 'running') return row.status === 'succeeded' ? { status: 'succeeded' } : { status: 'failed', failure: (row.failure as FailureKind) ?? 'internal', reason: row.errorMessage ?? '' };
    const schema = this.schemaOf(row);
    const chunks = chunkText(row.text ?? '', this.deps.settings.chunkChars);
    const usage = {
      promptTokens: answers.reduce((n, a) => n + a.promptTokens, 0),
      completionTokens: answers.reduce((n, a) => n + a.completionTokens, 0),
      modelCalls: answers.reduce((n, a) => n + a.calls, 0),
    };
    const partials = answers.filter((a) => a.data !== null).map((a) => ({ data: a.data, text: chunks[a.index] ?? '' }));
    // The merge when it validates, else the best single chunk's answer (see mergePartials); both validated here, in one
    // job in a thread with a deadline, whatever the chunks' steps found: `data` leaves only valid.
    const candidates = mergeCandidates(partials);
    const [mergedOk, bestOk] = candidates ? await this.validator.validate(schema, [candidates.merged ?? candidates.best, candidates.best]) : [];
    const merged = !candidates ? null : mergedOk.valid ? { data: candidates.merged ?? candidates.best } : bestOk.valid ? { data: candidates.best } : null;
    if (!merged) {
      const errors = answers.flatMap((a) => a.errors).slice(0, 5);
      const reason = `the model's answer does not validate against the schema${errors.length ? `: ${errors.join('; ')}` : ''}`;
      await this.em().nativeUpdate(StructuredExtraction, { id, status: 'running' }, { status: 'failed', failure: 'no_valid_output', errorMessage: reason, ...usage, updatedAt: new Date() });
      return { status: 'failed', failure: 'no_valid_output', reason };
    }
    const data = merged.data;
    await this.em().transactional(async (em) => {
      const changed = await em.nativeUpdate(StructuredExtraction, { id, status: 'running' }, { status: 'succeeded', data, model: this.modelName, ...usage, updatedAt: new Date() });
      if (changed) await this.deps.usage.recordExtractionUsage(em, { workspaceId: row.workspaceId, extractionId: id, pages: row.pages ?? null });
    });
    return { status: 'succeeded' };
  }

  /** Runs still `running`, untouched since `before`: the reconciliation asks Temporal about each one's workflow. */
  async stillRunning(before: Date, limit: number): Promise<string[]> {
    const rows = await this.em().find(StructuredExtraction, { status: 'running', updatedAt: { $lt: before } }, { fields: ['id'], orderBy: { updatedAt: 'asc' }, limit });
    return rows.map((r) => r.id);
  }

  /** A run that cannot finish (unreadable file, model down after retries): failed with the reason. Only a running row changes. */
  async fail(id: string, failure: FailureKind, reason: string): Promise<void> {
    await this.em().nativeUpdate(StructuredExtraction, { id, status: 'running' }, { status: 'failed', failure, errorMessage: reason.slice(0, 2000), updatedAt: new Date() });
  }
}

