import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { WidgetUpload, type IWidgetUpload } from '../../../db/entities';
import { describeVisual, type ImageDescriber } from '../../../lib/visual';
import { DomainError } from '../../errors';
import { OperationalError } from '../../../lib/failures';
import { newId } from '../../../lib/ids';
import { NoTextExtracted, sniffType, TranscriberError, type Transcriber } from '../../../lib/extract';
import type { ExtractFn } from '../../kb/indexing';
import type { BlobStore, StagedBlob } from '../../ports/blob-store';
import type { Repositories } from '../../repositories';
import type { SiteRow } from '../sites';
import type { UploadLinks } from './links';

/** Largest upload and largest voice note (the contract's limits, docs/contract.md; also OpenAI's transcription cap). */
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
  /** Null only for a file a person attached to a msgapp reply (storeForOperator). */
  site_id: string | null;
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
    site_id: u.siteId ?? null,
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

/** What the upload records need (the other parts': voice-notes.ts, search.ts; all of them: index.ts). */
export interface UploadRecordDeps {
  em: EntityManager;
  blobs: BlobStore;
  extract: ExtractFn;
  /** Needed for audio and video uploads; null when none is configured. */
  transcriber: Transcriber | null;
  /** Describes images and video key frames for the agent (VISION_MODEL); null: OCR and transcripts only. */
  vision?: ImageDescriber | null;
  links: UploadLinks;
  repos: Pick<Repositories, 'conversations' | 'agents'>;
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
export function transcriberUnavailable(err: Pick<TranscriberError, 'reason' | 'credentialRefused'>): DomainError {
  if (err.credentialRefused) {
    return new DomainError('missing_credential', `The transcription service refused its credential (${err.reason}): set TRANSCRIBE_API_KEY`);
  }
  return new DomainError('file_upload_prereq_failed', `The transcription service is unavailable (${err.reason}); retry later`);
}

/** A recording longer than TRANSCRIBE_MAX_SECONDS (the embedded transcriber's limit): 413, like a file over the size limit. */
const mediaTooLong = (reason: string, extra?: Record<string, unknown>) => new DomainError('media_too_long', `file: ${reason}`, extra);

/** The answer for a failed voice note or upload that is the transcriber's doing, or null when it is not. */
export function transcriptionFailure(outcome: { failure: UploadFailure; reason: string }, extra?: Record<string, unknown>): DomainError | null {
  if (outcome.failure === 'transcriber' || outcome.failure === 'transcriber_credential') {
    return transcriberUnavailable({ reason: outcome.reason, credentialRefused: outcome.failure === 'transcriber_credential' });
  }
  if (outcome.failure === 'too_long') return mediaTooLong(outcome.reason, extra);
  return null;
}

export const forbidden = () => new DomainError('forbidden', 'file_key: not a file of this conversation nor a downloadable knowledge-base file');
const uploadNotFound = (id: string) => new DomainError('not_found', `No upload with id '${id}' for this site`);

/**
 * The upload records and their state: the one owner of widget_uploads (the module's other
 * parts and every other module read it through here). Files a widget visitor uploads: stored content-addressed, typed from their bytes,
 * their text extracted before POST /upload answers — in the worker, by the
 * `widget-upload:<upload_id>` workflow (the isolated extraction process, heartbeating;
 * a lost worker's extraction is run again by another) — so the agent can read them when
 * they are attached to a message. Long ones are also chunked and
 * embedded for search, as a background task of the conversation (indexForSearch).
 */
export class UploadService {
  /** A blob owner kind (BlobRefRepository): how many uploads refer to these bytes. */
  static blobUses(em: EntityManager, sha256: string): Promise<number> {
    return em.count(WidgetUpload, { blobKey: sha256 });
  }

  constructor(private readonly deps: UploadRecordDeps) {}

  private em() {
    return this.deps.em.fork();
  }

  /** The checks that need only the site, in the contract's order (docs/contract.md); run before any byte is read. */
  async admit(site: SiteRow): Promise<void> {
    const agent = await this.deps.repos.agents.findAgent(this.em(), site.workspace_id, site.agent_id);
    if (!agent || agent.status !== 'published') throw new DomainError('no_workflow_configured', 'This site is not bound to a published agent');
    if (!agent.spec.triggers.web_chat?.file_upload) throw new DomainError('file_upload_not_enabled', "File upload is not enabled on this agent's web chat");
  }

  /**
   * Stores one upload (status `processing`), the first half of POST /upload. Takes
   * ownership of `staged`: it is committed to the blob store or discarded. The checks run
   * in the contract's order (docs/contract.md) and answer only codes of the widget contract. The text is then
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
          await this.deps.repos.conversations.webConversationOnSite(em, site.id, input.conversationId, { lock: true });
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
   * A file a person attaches to an inbox reply (issue 31): stored as the widget's uploads are (typed from its bytes,
   * the same types and size limit, content-addressed), as a ready upload of this conversation (and its site: a msgapp
   * conversation has none), with no text extracted (the agent does not read the team's files). Takes ownership of
   * `staged`. The reply names it by id.
   */
  async storeForOperator(conv: { workspace_id: string; id: string; site_id: string | null }, input: { staged: StagedBlob; fileName: string }): Promise<UploadResult> {
    const { staged } = input;
    let committed = false;
    try {
      if (staged.size === 0) throw new DomainError('invalid_request', 'file: is empty');
      const fileName = input.fileName.trim().slice(0, 255) || 'upload';
      const type = await sniffType(staged.tempPath, fileName);
      if (!type) throw new DomainError('unsupported_type', `file: '${fileName}' is not a supported document, spreadsheet, image, audio or video type`);
      await this.deps.blobs.commit(staged);
      committed = true;
      const id = newId('upl');
      const em = this.em();
      await em.insert(WidgetUpload, {
        id,
        workspaceId: conv.workspace_id,
        siteId: conv.site_id ?? null,
        conversationId: conv.id,
        fileName,
        mimeType: type.mime,
        sizeBytes: staged.size,
        blobKey: staged.sha256,
        status: 'ready',
        parsedChars: 0,
      });
      const row = { blob_key: staged.sha256, mime_type: type.mime, file_name: fileName };
      return { upload_id: id, file_id: staged.sha256, file_name: fileName, file_url: this.sign(row), file_key: uploadKey(id), mime_type: type.mime, status: 'ready' };
    } finally {
      if (!committed) await this.deps.blobs.discard(staged);
    }
  }

  /** A person's attachment of this conversation (storeForOperator), ready, with a freshly signed link; null when it is not one. */
  async operatorAttachment(conversationId: string, uploadId: string): Promise<Attachment | null> {
    const found = await this.em().findOne(WidgetUpload, { id: uploadId, conversationId, status: 'ready' });
    if (!found) return null;
    const r = uploadRow(found);
    return { upload_id: r.id, file_name: r.file_name, mime_type: r.mime_type, file_key: uploadKey(r.id), url: this.sign(r) };
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

  /** The text of uploads attached to a message, for the agent, oldest first; unknown ids are left out. */
  async attachmentsOf(ids: string[]): Promise<Array<{ file_name: string; mime_type: string; content: string }>> {
    if (!ids.length) return [];
    const rows = await this.em().find(WidgetUpload, { id: { $in: ids } }, { fields: ['fileName', 'mimeType', 'content'], orderBy: { createdAt: 'asc' } });
    return rows.map((r) => ({ file_name: r.fileName, mime_type: r.mimeType, content: r.content ?? '' }));
  }

  /** A ready upload's text (null: not ready, or without text), for its search index. */
  async readyContent(uploadId: string): Promise<string | null> {
    const row = await this.em().findOne(WidgetUpload, { id: uploadId, status: 'ready' }, { fields: ['content'] });
    return row?.content ?? null;
  }

  /** The names of the conversation's ready uploads, by id. */
  async readyNames(conversationId: string): Promise<Map<string, string>> {
    const rows = await this.em().find(WidgetUpload, { conversationId, status: 'ready' }, { fields: ['id', 'fileName'] });
    return new Map(rows.map((u) => [u.id, u.fileName]));
  }

  /** A freshly signed link to an upload of this site and conversation, or null when it has none. */
  async linkOf(site: SiteRow, conversationId: string, uploadId: string): Promise<string | null> {
    const row = await this.em().findOne(WidgetUpload, { id: uploadId, siteId: site.id, conversationId });
    return row ? this.sign(uploadRow(row)) : null;
  }

  /** The conversation an upload of this site belongs to (null: none yet), or 404. */
  async conversationOf(site: SiteRow, uploadId: string): Promise<string | null> {
    const row = await this.em().findOne(WidgetUpload, { id: uploadId, siteId: site.id }, { fields: ['conversationId'] });
    if (!row) throw uploadNotFound(uploadId);
    return row.conversationId ?? null;
  }

  private async requireConversation(site: SiteRow, conversationId: string, customerId: string | undefined): Promise<void> {
    // The site's own conversations only: not another site's of the same workspace and agent.
    const conv = await this.deps.repos.conversations.webConversationOnSite(this.em(), site.id, conversationId);
    // A bad form field (the widget contract has no 404 for it): 400 naming the field.
    if (!conv) throw new DomainError('invalid_request', `conversation_id: no conversation '${conversationId}' on this site`);
    if (customerId !== undefined && conv.customer_id !== customerId) throw new DomainError('invalid_request', `customer_id: not the customer of conversation '${conversationId}'`);
  }

  private sign(row: Pick<UploadRow, 'blob_key' | 'mime_type' | 'file_name'>): string {
    return this.deps.links.upload(row);
  }
}
