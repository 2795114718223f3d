import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { findAgent } from '../agents/agents';
import { webConversationOnSite } from '../conversations/conversations';
import type { SecretBox } from '../../lib/crypto/secret-box';
import { KbFile, WidgetUpload, WidgetUploadChunk, type IWidgetUpload } from '../../db/entities';
import type { AgentAttachmentElement } from '../chat/elements';
import { describeVisual, type ImageDescriber } from '../../providers/llm/vision';
import { DomainError } from '../errors';
import { OperationalError } from '../../lib/failures';
import { newId } from '../../lib/ids';
import { chunkSegments, DEFAULT_CHUNKING, type ChunkOptions } from '../kb/chunker';
import { dot, passageVectors, queryVector, type Embedder } from '../../providers/embeddings/embedder';
import { NoTextExtracted, probeDurationSeconds, sniffType, TranscriberError, type Transcriber } from '../../lib/extract';
import { downloadableKbFile } from '../kb/files';
import type { VisitorCitation } from '../chat/transcript';
import type { FairPool } from '../../lib/fair-pool';
import type { ExtractFn } from '../kb/indexing';
import { BlobGoneError, type BlobStore, type StagedBlob } from '../../providers/storage/blob-store';
import { holdBlob, holdsOlderThan, releaseHold } from '../storage/blob-refs';
import { signLink } from '../storage/signed-links';
import type { SiteRow } from './sites';

/** Largest upload and largest voice note (the spec's limits; also OpenAI's transcription cap). */
export const WIDGET_UPLOAD_MAX_BYTES = 25 * 1024 * 1024;
/** Failure types of the upload extraction step (activities/uploads.ts) for a failing transcriber. */
export const TRANSCRIBER_CREDENTIAL_REFUSED = 'TranscriberCredentialRefused';
export const TRANSCRIBER_UNAVAILABLE = 'TranscriberUnavailable';
/** Uploads of one conversation that may be processing at once. */
export const MAX_PROCESSING_PER_CONVERSATION = 5;
/** Parsed text longer than this is also indexed for search (WIDGET_UPLOAD_INDEX_CHARS). */
export const DEFAULT_UPLOAD_INDEX_CHARS = 20_000;
const SUMMARY_CHARS = 200;

export type UploadStatusValue = 'processing' | 'ready' | 'error';

export interface UploadRow {
  id: string;
  workspace_id: string;
  site_id: string;
  conversation_id: string | null;
  file_name: string;
  mime_type: string;
  size_bytes: string | number;
  /** SHA-256 of the bytes: their address in the blob store. */
  blob_key: string;
  status: UploadStatusValue;
  content: string | null;
  parsed_chars: number | null;
  summary: string | null;
  error_message: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The row as the upload's steps pass it on. */
function uploadRow(u: IWidgetUpload): UploadRow {
  return {
    id: u.id,
    workspace_id: u.workspaceId,
    site_id: u.siteId,
    conversation_id: u.conversationId ?? null,
    file_name: u.fileName,
    mime_type: u.mimeType,
    size_bytes: u.sizeBytes,
    blob_key: u.blobKey,
    status: u.status,
    content: u.content ?? null,
    parsed_chars: u.parsedChars ?? null,
    summary: u.summary ?? null,
    error_message: u.errorMessage ?? null,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
  };
}

/** An upload stored and waiting for its extraction (POST /upload's first half). */
export interface StoredUpload {
  row: UploadRow;
  /** The extractor's kind, decided from the bytes. */
  kind: string;
}

/** How the `widget-upload` workflow ended: ready, or why not (the route's answer depends on it). */
export type UploadOutcome =
  | { status: 'ready' }
  | { status: 'error'; failure: UploadFailure; reason: string };

/** Why an upload's or a voice note's processing failed: what the route answers depends on it. */
export type UploadFailure = 'unreadable' | 'too_long' | 'transcriber' | 'transcriber_credential' | 'internal';

/** How the `transcribe` workflow ended: the transcript (empty: no speech), or why not. */
export type TranscribeOutcome = { status: 'done'; transcript: string } | { status: 'error'; failure: UploadFailure; reason: string };

/** A voice note's bytes stored for the worker to transcribe (POST /transcribe's first half). */
export interface VoiceNote {
  /** SHA-256 of the bytes: their address in the blob store. */
  blobKey: string;
  mime: string;
  size: number;
  /** The note's hold on its bytes (blob_holds): no other owner's delete removes them while it is transcribed. */
  holdId: string;
}

/** POST /upload's answer. */
export interface UploadResult {
  upload_id: string;
  /** The content's identity (SHA-256 of the bytes): the same file uploaded twice has the same file_id. */
  file_id: string;
  file_name: string;
  /** A signed link, valid LINK_TTL_SECONDS; POST /file_url signs a fresh one from file_key. */
  file_url: string;
  /** Durable: `upload/<upload_id>`. */
  file_key: string;
  mime_type: string;
  status: 'ready';
}

export interface UploadStatus {
  upload_id: string;
  /** file_id, file_url and file_key: as in POST /upload's answer once the upload is ready, null before (and in error). */
  file_id: string | null;
  file_name: string;
  file_url: string | null;
  file_key: string | null;
  mime_type: string;
  status: UploadStatusValue;
  parsed_chars: number | null;
  summary: string | null;
  error_message: string | null;
}

/** An upload as history and replies show it. */
export interface Attachment {
  upload_id: string;
  file_name: string;
  mime_type: string;
  file_key: string;
  url: string;
}

/** An upload attached to a visitor message, with its text for the agent. */
export interface SendFile {
  id: string;
  file_name: string;
  mime_type: string;
  content: string;
  parsed_chars: number;
}

export interface UploadPassage {
  upload_id: string;
  file_name: string;
  text: string;
  score: number;
}

export interface UploadServiceDeps {
  em: EntityManager;
  blobs: BlobStore;
  box: SecretBox;
  extract: ExtractFn;
  /** Needed for audio and video uploads and for /transcribe; null when none is configured. */
  transcriber: Transcriber | null;
  /** Describes images and video key frames for the agent (VISION_MODEL); null: OCR and transcripts only. */
  vision?: ImageDescriber | null;
  embedder: () => Promise<Embedder>;
  indexChars?: number;
  /** Longest voice note taken, in seconds (WIDGET_TRANSCRIBE_MAX_SECONDS); absent: the transcriber's own cap. */
  maxMediaSeconds?: number;
  /** The process's work pool: voice notes take turns by workspace in its anonymous lane. Absent: they run as they come. */
  pool?: FairPool;
  chunking?: ChunkOptions;
  /** PUBLIC_BASE_URL: file links are absolute (the widget runs on another site's page). */
  publicBaseUrl: string;
}

/**
 * Durable keys of downloadable files: `upload/<upload_id>` for a visitor's upload,
 * `kb/<file_id>` for a knowledge-base file version.
 */
export const uploadKey = (uploadId: string) => `upload/${uploadId}`;
export const kbFileKey = (fileId: string) => `kb/${fileId}`;

/** The leading ~200 characters of the text, cut at a word boundary, with an ellipsis when cut. */
export function summarize(text: string, max = SUMMARY_CHARS): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= max) return flat;
  const cut = flat.slice(0, max + 1);
  const space = cut.lastIndexOf(' ');
  // One very long "word" (a URL, a hash) is cut where it is.
  const head = space > max / 2 ? cut.slice(0, space) : flat.slice(0, max);
  return `${head.replace(/[\s.,;:!?-]+$/, '')}…`;
}

/**
 * A failing transcription service, as the widget contract names it (503, "uploads not
 * ready"): `missing_credential` when the service refused its credential (401/403: no or a
 * wrong TRANSCRIBE_API_KEY), else `file_upload_prereq_failed`. Never the server API's codes.
 */
function transcriberUnavailable(err: Pick<TranscriberError, 'reason' | 'credentialRefused'>): DomainError {
  if (err.credentialRefused) {
    return new DomainError('missing_credential', `The transcription service refused its credential (${err.reason}): set TRANSCRIBE_API_KEY`);
  }
  return new DomainError('file_upload_prereq_failed', `The transcription service is unavailable (${err.reason}); retry later`);
}

/** A recording longer than TRANSCRIBE_MAX_SECONDS (the embedded transcriber's limit): 413, like a file over the size limit. */
const mediaTooLong = (reason: string, extra?: Record<string, unknown>) => new DomainError('media_too_long', `file: ${reason}`, extra);

/** The answer for a failed voice note or upload that is the transcriber's doing, or null when it is not. */
function transcriptionFailure(outcome: { failure: UploadFailure; reason: string }, extra?: Record<string, unknown>): DomainError | null {
  if (outcome.failure === 'transcriber' || outcome.failure === 'transcriber_credential') {
    return transcriberUnavailable({ reason: outcome.reason, credentialRefused: outcome.failure === 'transcriber_credential' });
  }
  if (outcome.failure === 'too_long') return mediaTooLong(outcome.reason, extra);
  return null;
}

const forbidden = () => new DomainError('forbidden', 'file_key: not a file of this conversation nor a downloadable knowledge-base file');
const uploadNotFound = (id: string) => new DomainError('not_found', `No upload with id '${id}' for this site`);

/**
 * Files a widget visitor uploads: stored content-addressed, typed from their bytes,
 * their text extracted before POST /upload answers — in the worker, by the
 * `widget-upload:<upload_id>` workflow (the isolated extraction process, heartbeating;
 * a lost worker's extraction is run again by another) — so the agent can read them when
 * they are attached to a message. Long ones are also chunked and
 * embedded for search, as a background task of the conversation (indexForSearch).
 */
export class UploadService {
  private readonly indexChars: number;

  constructor(private readonly deps: UploadServiceDeps) {
    this.indexChars = deps.indexChars ?? DEFAULT_UPLOAD_INDEX_CHARS;
  }

  private em() {
    return this.deps.em.fork();
  }

  /** Whether /transcribe and audio or video uploads can work. */
  get canTranscribe(): boolean {
    return this.deps.transcriber !== null;
  }

  /** The checks that need only the site, in the spec's order; run before any byte is read. */
  async admit(site: SiteRow): Promise<void> {
    const agent = await findAgent(this.em(), site.workspace_id, site.agent_id);
    if (!agent || agent.status !== 'published') throw new DomainError('no_workflow_configured', 'This site is not bound to a published agent');
    if (!agent.spec.triggers.web_chat?.file_upload) throw new DomainError('file_upload_not_enabled', "File upload is not enabled on this agent's web chat");
  }

  /**
   * Stores one upload (status `processing`), the first half of POST /upload. Takes
   * ownership of `staged`: it is committed to the blob store or discarded. The checks run
   * in the spec's order and answer only codes of the widget contract. The text is then
   * extracted in the worker (the `widget-upload:<upload_id>` workflow: `extractStored`),
   * and `answer` turns its outcome into the route's answer.
   */
  async store(site: SiteRow, input: { staged: StagedBlob; fileName: string; conversationId?: string; customerId?: string }): Promise<StoredUpload> {
    const { staged } = input;
    let committed = false;
    try {
      await this.admit(site);
      if (input.conversationId) await this.requireConversation(site, input.conversationId, input.customerId);
      if (staged.size === 0) throw new DomainError('invalid_request', 'file: is empty');
      const fileName = input.fileName.trim().slice(0, 255) || 'upload';
      const type = await sniffType(staged.tempPath, fileName);
      if (!type) throw new DomainError('unsupported_type', `file: '${fileName}' is not a supported document, spreadsheet, image, audio or video type`);

      const row = await this.em().transactional(async (em) => {
        if (input.conversationId) {
          // The conversation's row lock serialises concurrent uploads to it: the count and
          // the insert below cannot interleave with another upload's. An upload whose
          // worker was lost is finished by another worker (Temporal retries the step), so
          // no upload stays processing for good and none needs sweeping here.
          await webConversationOnSite(em, site.id, input.conversationId, { lock: true });
          const n = await em.count(WidgetUpload, { conversationId: input.conversationId, status: 'processing' });
          if (n >= MAX_PROCESSING_PER_CONVERSATION) {
            throw new DomainError('too_many_files', `More than ${MAX_PROCESSING_PER_CONVERSATION} files would be processing in this conversation; wait for one to finish`);
          }
        }
        if ((type.kind === 'audio' || type.kind === 'video') && !this.deps.transcriber) {
          throw new DomainError('file_upload_prereq_failed', `${type.kind} files need a transcriber, and none is configured (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)`);
        }
        // Bytes first: the row (visible at commit) never names a blob that is not stored.
        await this.deps.blobs.commit(staged);
        committed = true;
        const id = newId('upl');
        await em.insert(WidgetUpload, {
          id,
          workspaceId: site.workspace_id,
          siteId: site.id,
          conversationId: input.conversationId ?? null,
          fileName,
          mimeType: type.mime,
          sizeBytes: staged.size,
          blobKey: staged.sha256,
          status: 'processing',
        });
        // Read back for the columns the database fills in (created_at, updated_at).
        return uploadRow(await em.findOneOrFail(WidgetUpload, { id }, { refresh: true }));
      });
      return { row, kind: type.kind };
    } finally {
      if (!committed) await this.deps.blobs.discard(staged);
    }
  }

  /**
   * The worker's step (`widget-upload` workflow): extracts a processing upload's text in
   * the isolated extraction process and marks it ready, storing the text. A file with no
   * text (a photo, a blank scan, silence) is ready with parsed_chars 0: the agent is told
   * what was attached. Safe to run again: only a processing upload changes. Failures
   * leave as OperationalErrors: the extraction's own (ExtractionError, ExtractionCrash),
   * or the transcriber's as `TranscriberCredentialRefused` / `TranscriberUnavailable`.
   */
  async extractStored(uploadId: string, kind: string): Promise<'ready' | 'settled'> {
    const found = await this.em().findOne(WidgetUpload, { id: uploadId, status: 'processing' });
    if (!found) return 'settled';
    const row = uploadRow(found);
    let content: string;
    try {
      content = await this.deps.blobs.withLocalFile(row.blob_key, async (filePath) => {
        const text = await this.deps
          // Anyone on the internet may upload: the pool's anonymous lane, in the workspace's turn, with its limits.
          .extract({ filePath, kind, mime: row.mime_type, fileName: row.file_name, owner: { workspaceId: row.workspace_id, anonymous: true } })
          .then(({ segments }) => segments.map((s) => s.text).join('\n\n'))
          .catch((err: unknown) => {
            // A photo with no text still has a picture to describe.
            if (err instanceof NoTextExtracted && this.deps.vision && (kind === 'image' || kind === 'video')) return '';
            throw err;
          });
        // A vision model that fails leaves the text alone: the upload is still read (OCR, transcript).
        const seen = this.deps.vision ? await describeVisual(filePath, kind, row.mime_type, this.deps.vision).catch(() => '') : '';
        return [seen, text && seen ? `Text in it:\n${text}` : text].filter(Boolean).join('\n\n');
      });
      if (!content) throw new NoTextExtracted('nothing to read');
    } catch (err) {
      if (err instanceof TranscriberError && !(err instanceof NoTextExtracted)) {
        throw new OperationalError(err.credentialRefused ? TRANSCRIBER_CREDENTIAL_REFUSED : TRANSCRIBER_UNAVAILABLE, err.reason, err.retryable && !err.credentialRefused, {
          detail: err.detail,
        });
      }
      if (!(err instanceof NoTextExtracted)) throw err;
      // Nothing to read is not a failure here: a visitor's photo is a normal attachment.
      content = '';
    }
    await this.em().nativeUpdate(
      WidgetUpload,
      { id: row.id, status: 'processing' },
      { status: 'ready', content, parsedChars: content.length, summary: content ? summarize(content) : null, updatedAt: new Date() },
    );
    return 'ready';
  }

  /** An upload whose extraction failed for good: status error with the reason (a processing upload only). */
  async failExtraction(uploadId: string, reason: string): Promise<boolean> {
    const n = await this.em().nativeUpdate(WidgetUpload, { id: uploadId, status: 'processing' }, { status: 'error', errorMessage: reason.slice(0, 1000), updatedAt: new Date() });
    return n > 0;
  }

  /** Uploads still processing, untouched since `before`: the reconciliation asks Temporal about each one's workflow. */
  async stillProcessing(before: Date, limit: number): Promise<string[]> {
    const rows = await this.em().find(WidgetUpload, { status: 'processing', updatedAt: { $lt: before } }, { fields: ['id'], orderBy: { updatedAt: 'asc' }, limit });
    return rows.map((r) => r.id);
  }

  /**
   * POST /upload's answer once the workflow ended: 201 ready, or the error the outcome
   * stands for — 400 invalid_request naming `file` (with upload_id) for a file that cannot
   * be read, 503 missing_credential / file_upload_prereq_failed for the transcriber, and
   * a plain error (500 internal_error) for anything else. The upload stays readable in
   * status error.
   */
  answer(stored: StoredUpload, outcome: UploadOutcome): UploadResult {
    const { row } = stored;
    if (outcome.status === 'error') {
      const failure = transcriptionFailure(outcome, { upload_id: row.id });
      if (failure) throw failure;
      if (outcome.failure === 'unreadable') throw new DomainError('invalid_request', `file: could not be read (${outcome.reason})`, { upload_id: row.id });
      throw new Error(`upload ${row.id}: ${outcome.reason}`);
    }
    return {
      upload_id: row.id,
      file_id: row.blob_key,
      file_name: row.file_name,
      file_url: this.sign(row),
      file_key: uploadKey(row.id),
      mime_type: row.mime_type,
      status: 'ready',
    };
  }

  /** Status of an upload of this site (and of that conversation, when one is named). */
  async status(site: SiteRow, uploadId: string, conversationId?: string): Promise<UploadStatus> {
    const found = await this.em().findOne(WidgetUpload, { id: uploadId, siteId: site.id });
    const row = found ? uploadRow(found) : null;
    if (!row || (conversationId !== undefined && row.conversation_id !== conversationId)) throw uploadNotFound(uploadId);
    const ready = row.status === 'ready';
    return {
      upload_id: row.id,
      file_id: ready ? row.blob_key : null,
      file_name: row.file_name,
      file_url: ready ? this.sign(row) : null,
      file_key: ready ? uploadKey(row.id) : null,
      mime_type: row.mime_type,
      status: row.status,
      parsed_chars: row.parsed_chars,
      summary: row.summary,
      error_message: row.error_message,
    };
  }

  /** A signed link to a knowledge-base file's bytes (an agent's attachment). */
  signKbFile(file: { sha256: string; mime_type: string; name: string }): string {
    return signLink(this.deps.box, this.deps.publicBaseUrl, { sha256: file.sha256, mime: file.mime_type, name: file.name });
  }

  /**
   * A reply's citations as /history shows them: a linked knowledge-base file gets a freshly signed
   * link (the stored one may have expired) only while the site's agent may still hand it out (the rule
   * of POST /file_url: the business may have taken it out of the agent's selection since), else none;
   * the others as they are (never linked).
   */
  async resignCitations(site: SiteRow, citations: VisitorCitation[]): Promise<VisitorCitation[]> {
    if (!citations.some((c) => c.url)) return citations;
    const em = this.em();
    const agent = await findAgent(em, site.workspace_id, site.agent_id);
    const kb = agent?.spec.knowledge_base ?? { folder_ids: [], file_ids: [] };
    const out: VisitorCitation[] = [];
    for (const c of citations) {
      const file = c.url && /^file_[0-9a-f]{24}$/.test(c.file_id) ? await downloadableKbFile(em, site.workspace_id, c.file_id, kb) : null;
      out.push({ file_id: c.file_id, title: c.title, ...(file ? { url: this.signKbFile(file) } : {}) });
    }
    return out;
  }

  /**
   * A freshly signed link for `file_key`: an upload of this conversation, or a
   * knowledge-base file the site's agent may show (an active file it selects by id, or
   * the current active version of a file under one of its folders). Anything else,
   * including a conversation that is not the site's, is 403 forbidden.
   */
  async fileUrl(site: SiteRow, conversationId: string, fileKey: string): Promise<{ url: string }> {
    const em = this.em();
    // The site's own conversations only: not another site's of the same workspace and agent.
    if (!(await webConversationOnSite(em, site.id, conversationId))) throw forbidden();
    const m = /^(upload|kb)\/([a-z]+_[0-9a-f]{24})$/.exec(fileKey);
    if (!m) throw forbidden();
    if (m[1] === 'upload') {
      const row = await em.findOne(WidgetUpload, { id: m[2], siteId: site.id, conversationId });
      if (!row) throw forbidden();
      return { url: this.sign(uploadRow(row)) };
    }
    const agent = await findAgent(em, site.workspace_id, site.agent_id);
    const kb = agent?.spec.knowledge_base ?? { folder_ids: [], file_ids: [] };
    const file = await downloadableKbFile(em, site.workspace_id, m[2], kb);
    if (!file) throw forbidden();
    return { url: this.signKbFile(file) };
  }

  /**
   * POST /transcribe's first half: a voice note checked and its bytes committed to the blob
   * store for the worker (the `transcribe:<id>` workflow) to read. Takes ownership of
   * `staged` (committed or discarded). Audio only, by its bytes. The transcriber is an
   * upload prerequisite, so its absence answers the upload codes of the contract (503
   * file_upload_prereq_failed). Nothing about the note is recorded: the workflow releases
   * the bytes once transcribed (releaseVoiceNote).
   */
  async storeVoiceNote(input: { staged: StagedBlob; fileName: string }): Promise<VoiceNote> {
    let committed = false;
    try {
      const type = input.staged.size ? await sniffType(input.staged.tempPath, input.fileName) : null;
      if (type?.kind !== 'audio') throw new DomainError('not_audio', 'file: not an audio file (webm, mp3, wav, ogg, opus, m4a)');
      if (!this.deps.transcriber) {
        throw new DomainError('file_upload_prereq_failed', 'Voice notes need a transcriber, and none is configured (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)');
      }
      // The length the recording states, read before it is stored or queued: a long one costs no transcription.
      const max = this.deps.maxMediaSeconds;
      const seconds = max === undefined ? null : await probeDurationSeconds(input.staged.tempPath);
      if (max !== undefined && seconds !== null && seconds > max) {
        throw new DomainError('invalid_request', `file: the recording is ${Math.ceil(seconds)} s long; voice notes are at most ${max} s`);
      }
      // Held before the bytes are committed: another owner's delete of the same bytes can never fall in between.
      const holdId = await holdBlob(this.deps.em, input.staged.sha256, newId('trn'));
      try {
        await this.deps.blobs.commit(input.staged);
      } catch (err) {
        await releaseHold(this.deps.em, this.deps.blobs, input.staged.sha256, holdId);
        throw err;
      }
      committed = true;
      return { blobKey: input.staged.sha256, mime: type.mime, size: input.staged.size, holdId };
    } finally {
      if (!committed) await this.deps.blobs.discard(input.staged);
    }
  }

  /**
   * The worker's step (`transcribe` workflow): a stored voice note to text, with this
   * process's transcriber. An empty string is a recording without speech. Failures leave
   * as OperationalErrors: the transcriber's as `TranscriberCredentialRefused` /
   * `TranscriberUnavailable`, a recording over the length limit as `MediaTooLong`, one
   * that cannot be decoded as `ExtractionError`.
   */
  async transcribeStored(blobKey: string, mime: string, signal?: AbortSignal, workspaceId?: string): Promise<string> {
    const transcriber = this.deps.transcriber;
    if (!transcriber) throw new OperationalError(TRANSCRIBER_UNAVAILABLE, 'no transcriber is configured on the worker (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)', false);
    try {
      // The cap again where the recording is decoded: a container that states no length (a browser's WebM) stops there.
      const run = () => this.deps.blobs.withLocalFile(blobKey, (filePath) => transcriber.transcribe(filePath, mime, { signal, maxSeconds: this.deps.maxMediaSeconds }));
      // Anyone may send voice notes: they wait in the anonymous lane, workspace by workspace (a note of a workflow started before the workspace was passed is a turn of its own).
      const text = this.deps.pool ? await this.deps.pool.run({ workspaceId: workspaceId ?? '', anonymous: true }, run) : await run();
      return text.trim();
    } catch (err) {
      if (err instanceof TranscriberError) {
        throw new OperationalError(err.credentialRefused ? TRANSCRIBER_CREDENTIAL_REFUSED : TRANSCRIBER_UNAVAILABLE, err.reason, err.retryable && !err.credentialRefused, { detail: err.detail });
      }
      // The note's own failures (too long, not decodable) and lost bytes as they are.
      if (err instanceof OperationalError || err instanceof BlobGoneError) throw err;
      // The HTTP transcriber's network errors and time-outs (thrown as they are): the service's failure, not the note's.
      throw new OperationalError(TRANSCRIBER_UNAVAILABLE, 'transcription failed', true, { detail: err instanceof Error ? err.message : String(err) });
    }
  }

  /**
   * Drops a transcribed voice note's hold on its bytes, and the bytes unless another owner
   * of any kind (an upload, a knowledge-base file, msgapp media, a recording, another voice
   * note…, in any workspace) has the same ones: the store is content-addressed and shared.
   */
  async releaseVoiceNote(blobKey: string, holdId?: string): Promise<void> {
    await releaseHold(this.deps.em, this.deps.blobs, blobKey, holdId);
  }

  /** Voice notes held since before `before` (id `trn_…`, their workflow `transcribe:trn_…`), for the reconciliation. */
  voiceNotesHeld(before: Date, limit: number): Promise<Array<{ id: string; sha256: string }>> {
    return holdsOlderThan(this.deps.em, 'trn_', before, limit);
  }

  /**
   * POST /transcribe's answer once the workflow ended: the transcript, 422
   * empty_transcript for a recording without speech, 413 media_too_long past
   * TRANSCRIBE_MAX_SECONDS, 400 invalid_request for one that cannot be decoded, 503
   * file_upload_prereq_failed / missing_credential for the transcriber.
   */
  transcriptAnswer(outcome: TranscribeOutcome): { transcript: string } {
    if (outcome.status === 'error') {
      const failure = transcriptionFailure(outcome);
      if (failure) throw failure;
      if (outcome.failure === 'unreadable') throw new DomainError('invalid_request', `file: could not be read (${outcome.reason})`);
      throw new Error(`voice note: ${outcome.reason}`);
    }
    if (!outcome.transcript) throw new DomainError('empty_transcript', 'No speech was found in the recording');
    return { transcript: outcome.transcript };
  }

  /** Attachment records with freshly signed links, in the order asked; unknown ids are left out. */
  async describe(uploadIds: string[]): Promise<Attachment[]> {
    if (!uploadIds.length) return [];
    const rows = await this.em().find(WidgetUpload, { id: { $in: uploadIds } });
    const byId = new Map(rows.map((r) => [r.id, uploadRow(r)]));
    return uploadIds
      .filter((id) => byId.has(id))
      .map((id) => {
        const r = byId.get(id)!;
        return { upload_id: r.id, file_name: r.file_name, mime_type: r.mime_type, file_key: uploadKey(r.id), url: this.sign(r) };
      });
  }

  /**
   * A stored message's attachments with freshly signed links, in their order: a
   * visitor's uploads (`upload_id`) and the agent's knowledge-base files (`file_key`
   * `kb/…`); anything whose bytes are gone is left out.
   */
  async describeStored(attachments: unknown[]): Promise<Array<Attachment | AgentAttachmentElement>> {
    const items = attachments.filter((a): a is Record<string, unknown> => typeof a === 'object' && a !== null);
    const uploads = new Map((await this.describe(items.map((a) => a.upload_id).filter((id): id is string => typeof id === 'string'))).map((u) => [u.upload_id, u]));
    const kbIds = items.map((a) => (typeof a.file_key === 'string' ? /^kb\/(file_[0-9a-f]{24})$/.exec(a.file_key)?.[1] : undefined)).filter((id): id is string => !!id);
    const files = kbIds.length ? new Map((await this.em().find(KbFile, { id: { $in: kbIds } }, { fields: ['id', 'sha256', 'mimeType', 'name'] })).map((f) => [f.id, f])) : new Map();
    const out: Array<Attachment | AgentAttachmentElement> = [];
    for (const a of items) {
      if (typeof a.upload_id === 'string' && uploads.has(a.upload_id)) out.push(uploads.get(a.upload_id)!);
      const kb = typeof a.file_key === 'string' ? files.get(a.file_key.slice(3)) : undefined;
      if (kb) out.push({ file_key: `kb/${kb.id}`, file_name: kb.name, mime_type: kb.mimeType, url: this.signKbFile({ sha256: kb.sha256, mime_type: kb.mimeType, name: kb.name }) });
    }
    return out;
  }

  /**
   * Validates a message's `file_refs`: each must be a ready upload of this conversation,
   * or of no conversation yet and this site (it is then attached to the conversation).
   * Answers 400 invalid_request naming the first bad ref.
   */
  async forSend(site: SiteRow, conversationId: string, uploadIds: string[]): Promise<SendFile[]> {
    const ids = [...new Set(uploadIds)];
    if (!ids.length) return [];
    return this.em().transactional(async (em) => {
      // Locked: two sends attaching one unattached upload to different conversations cannot both win.
      const rows = await em.find(WidgetUpload, { id: { $in: ids }, siteId: site.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      const byId = new Map(rows.map((r) => [r.id, uploadRow(r)]));
      for (const id of ids) {
        const r = byId.get(id);
        if (!r || (r.conversation_id !== null && r.conversation_id !== conversationId)) {
          throw new DomainError('invalid_request', `file_refs: '${id}' is not an upload of this conversation`);
        }
        if (r.status !== 'ready') throw new DomainError('invalid_request', `file_refs: upload '${id}' is ${r.status === 'error' ? 'in error' : 'still processing'}`);
      }
      const loose = ids.filter((id) => byId.get(id)!.conversation_id === null);
      if (loose.length) {
        await em.nativeUpdate(WidgetUpload, { id: { $in: loose } }, { conversationId, updatedAt: new Date() });
      }
      return ids.map((id) => {
        const r = byId.get(id)!;
        return { id: r.id, file_name: r.file_name, mime_type: r.mime_type, content: r.content ?? '', parsed_chars: r.parsed_chars ?? 0 };
      });
    });
  }

  /** Whether an upload's text is long enough to be indexed for search (run indexForSearch then). */
  needsIndexing(upload: { status?: UploadStatusValue; parsed_chars?: number | null; content?: string | null }): boolean {
    if (upload.status !== undefined && upload.status !== 'ready') return false;
    return (upload.parsed_chars ?? upload.content?.length ?? 0) > this.indexChars;
  }

  /**
   * Chunks (the knowledge base's chunker) and embeds an upload's text into
   * widget_upload_chunks. Idempotent: the set of passages is replaced in one
   * transaction. Returns the number of passages (0 for an upload without text).
   */
  async indexForSearch(uploadId: string): Promise<number> {
    const row = await this.em().findOne(WidgetUpload, { id: uploadId, status: 'ready' }, { fields: ['content'] });
    if (!row?.content) return 0;
    const chunks = chunkSegments([{ text: row.content }], this.deps.chunking ?? DEFAULT_CHUNKING);
    const embedder = await this.deps.embedder();
    const vectors: Float32Array[] = [];
    for (let i = 0; i < chunks.length; i += 32) vectors.push(...(await passageVectors(embedder, chunks.slice(i, i + 32).map((c) => c.text))));
    await this.em().transactional(async (em) => {
      await em.nativeDelete(WidgetUploadChunk, { uploadId });
      for (let i = 0; i < chunks.length; i += 100) {
        const batch = chunks.slice(i, i + 100);
        await em.insertMany(
          WidgetUploadChunk,
          batch.map((c, j) => ({ uploadId, ord: c.ordinal, text: c.text, embedding: Array.from(vectors[i + j]), embeddingModel: embedder.modelId })),
        );
      }
    });
    return chunks.length;
  }

  /** The `k` passages of the conversation's indexed uploads closest in meaning to `query` (cosine). */
  async search(conversationId: string, query: string, k = 5): Promise<UploadPassage[]> {
    if (!query.trim() || k <= 0) return [];
    const embedder = await this.deps.embedder();
    const em = this.em();
    const uploads = await em.find(WidgetUpload, { conversationId, status: 'ready' }, { fields: ['id', 'fileName'] });
    if (!uploads.length) return [];
    const names = new Map(uploads.map((u) => [u.id, u.fileName]));
    const rows = await em.find(
      WidgetUploadChunk,
      { uploadId: { $in: [...names.keys()] }, embeddingModel: embedder.modelId },
      { fields: ['uploadId', 'ord', 'text', 'embedding'], orderBy: { uploadId: 'asc', ord: 'asc' } },
    );
    if (!rows.length) return [];
    const q = await queryVector(embedder, query);
    return rows
      .map((r) => ({ upload_id: r.uploadId, file_name: names.get(r.uploadId)!, text: r.text, score: Math.round(dot(q, Float32Array.from(r.embedding ?? [])) * 1e6) / 1e6 }))
      .sort((a, b) => b.score - a.score)
      .slice(0, k);
  }

  /** The conversation an upload of this site belongs to (null: none yet), or 404. */
  async conversationOf(site: SiteRow, uploadId: string): Promise<string | null> {
    const row = await this.em().findOne(WidgetUpload, { id: uploadId, siteId: site.id }, { fields: ['conversationId'] });
    if (!row) throw uploadNotFound(uploadId);
    return row.conversationId ?? null;
  }

  private async requireConversation(site: SiteRow, conversationId: string, customerId: string | undefined): Promise<void> {
    // The site's own conversations only: not another site's of the same workspace and agent.
    const conv = await webConversationOnSite(this.em(), site.id, conversationId);
    // A bad form field (the widget contract has no 404 for it): 400 naming the field.
    if (!conv) throw new DomainError('invalid_request', `conversation_id: no conversation '${conversationId}' on this site`);
    if (customerId !== undefined && conv.customer_id !== customerId) throw new DomainError('invalid_request', `customer_id: not the customer of conversation '${conversationId}'`);
  }

  private sign(row: Pick<UploadRow, 'blob_key' | 'mime_type' | 'file_name'>): string {
    return signLink(this.deps.box, this.deps.publicBaseUrl, { sha256: row.blob_key, mime: row.mime_type, name: row.file_name });
  }
}
