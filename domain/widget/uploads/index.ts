import type { EntityManager } from '@mikro-orm/postgresql';
import type { SecretBox } from '../../../lib/crypto/secret-box';
import type { FairPool } from '../../../lib/fair-pool';
import type { Transcriber } from '../../../lib/extract';
import type { Embedder } from '../../ports/embedder';
import type { ImageDescriber } from '../../../lib/visual';
import type { BlobStore } from '../../ports/blob-store';
import type { ChunkOptions } from '../../kb/chunker';
import type { ExtractFn } from '../../kb/indexing';
import type { Repositories } from '../../repositories';
import { UploadLinks } from './links';
import { UploadService } from './records';
import { UploadSearchService } from './search';
import { VoiceNoteService } from './voice-notes';

export * from './records';
export { UploadLinks } from './links';
export { UploadSearchService } from './search';
export { VoiceNoteService } from './voice-notes';

/**
 * The widget's uploads, split by job: the upload records and their state (records.ts, the
 * one owner of widget_uploads), voice notes and their transcription (voice-notes.ts), and
 * upload search and links (search.ts, the owner of widget_upload_chunks).
 */
export interface UploadServices {
  uploads: UploadService;
  voiceNotes: VoiceNoteService;
  uploadSearch: UploadSearchService;
}

export interface UploadServiceDeps {
  em: EntityManager;
  repos: Pick<Repositories, 'conversations' | 'agents' | 'kb' | 'blobRefs'>;
  blobs: BlobStore;
  box: SecretBox;
  extract: ExtractFn;
  /** Needed for audio and video uploads and for /transcribe; null when none is configured. */
  transcriber: Transcriber | null;
  /** Describes images and video key frames for the agent (VISION_MODEL); null: OCR and transcripts only. */
  vision?: ImageDescriber | null;
  embedder: () => Promise<Embedder>;
  /** Parsed text longer than this is also indexed for search (WIDGET_UPLOAD_INDEX_CHARS). */
  indexChars?: number;
  /** Longest voice note taken, in seconds (WIDGET_TRANSCRIBE_MAX_SECONDS); absent: the transcriber's own cap. */
  maxMediaSeconds?: number;
  /** The process's work pool: voice notes take turns by workspace in its anonymous lane. Absent: they run as they come. */
  pool?: FairPool;
  chunking?: ChunkOptions;
  /** PUBLIC_BASE_URL: file links are absolute (the widget runs on another site's page). */
  publicBaseUrl: string;
}

export function createUploadServices(deps: UploadServiceDeps): UploadServices {
  const links = new UploadLinks(deps.box, deps.publicBaseUrl);
  const uploads = new UploadService({ em: deps.em, blobs: deps.blobs, extract: deps.extract, transcriber: deps.transcriber, vision: deps.vision, links, repos: deps.repos });
  return {
    uploads,
    voiceNotes: new VoiceNoteService({ em: deps.em, blobs: deps.blobs, blobRefs: deps.repos.blobRefs, transcriber: deps.transcriber, maxMediaSeconds: deps.maxMediaSeconds, pool: deps.pool }),
    uploadSearch: new UploadSearchService({ em: deps.em, records: uploads, links, repos: deps.repos, embedder: deps.embedder, indexChars: deps.indexChars, chunking: deps.chunking }),
  };
}

/** What an agent's turn reads of the uploads: the attached ones' text, passages of the long ones, links to knowledge-base files. */
export type AgentUploads = Pick<UploadService, 'attachmentsOf'> & Pick<UploadSearchService, 'search' | 'signKbFile'>;

export function agentUploads(parts: UploadServices): AgentUploads {
  return {
    attachmentsOf: (ids) => parts.uploads.attachmentsOf(ids),
    search: (conversationId, query, k) => parts.uploadSearch.search(conversationId, query, k),
    signKbFile: (file) => parts.uploadSearch.signKbFile(file),
  };
}
