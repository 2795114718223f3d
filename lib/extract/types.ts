/** Shared types of document sniffing and extraction (imported by the parent and the child). */

import { OperationalError } from '../failures';

export type DocKind =
  | 'pdf' | 'docx' | 'doc' | 'odt' | 'rtf' | 'pptx'
  | 'xlsx' | 'xls' | 'csv' | 'ods'
  | 'text' | 'markdown' | 'html' | 'json' | 'xml'
  | 'eml' | 'msg'
  | 'image' | 'audio' | 'video';

export interface Segment {
  text: string;
  /** 1-based PDF page. */
  page?: number;
  /** Spreadsheet sheet name. */
  sheet?: string;
  /** 1-based spreadsheet/CSV row (the header row is row 1 of a CSV). */
  row?: number;
  /** The nearest heading above this text (documents, slides' titles, email subjects). */
  heading?: string;
  /** 1-based slide number. */
  slide?: number;
  /** The document's own title where its format declares one (HTML `<title>`): on the first segment only. */
  title?: string;
}

export interface ExtractResult {
  segments: Segment[];
  warnings: string[];
}

/**
 * Extraction failed for this one file. `reason` is short and user-facing ("PDF is corrupt
 * or encrypted", "extraction exceeded 60 s"); `detail` (if any) is for logs only.
 * `retryable`: the failure says nothing about the document (the extraction process died
 * or never started, the transcription server was busy or unreachable), so a retry may
 * succeed; its code is then `ExtractionCrash`, else `ExtractionError`.
 */
export class ExtractionError extends OperationalError {
  override readonly name = 'ExtractionError';
  constructor(
    readonly reason: string,
    detail?: string,
    retryable = false,
    /** A more precise failure type than ExtractionError (subclasses). */
    code?: string,
  ) {
    super(code ?? (retryable ? 'ExtractionCrash' : 'ExtractionError'), reason, retryable, { detail });
  }
}

/** The failure type of MediaTooLong (the widget answers it 413 media_too_long). */
export const MEDIA_TOO_LONG = 'MediaTooLong';

/**
 * A recording longer than the embedded transcriber takes (TRANSCRIBE_MAX_SECONDS): refused
 * for good, before any of it is transcribed.
 */
export class MediaTooLong extends ExtractionError {
  constructor(readonly maxSeconds: number) {
    super(`the recording is longer than ${maxSeconds} s, the most that is transcribed`, undefined, false, MEDIA_TOO_LONG);
  }
}

/**
 * Extraction worked but the file holds no text: a photo, a blank scan, a silent recording.
 * The knowledge base treats it as a failure (docs/decisions.md "Knowledge base": zero text is an error); a widget
 * upload does not (a visitor's photo is a normal attachment).
 */
export class NoTextExtracted extends ExtractionError {}

/**
 * The speech-to-text service failed (HTTP error, no answer, time-out): a failure of the
 * service, not of the file. `credentialRefused` when it answered 401 or 403, i.e. its
 * credential (TRANSCRIBE_API_KEY) is missing or wrong.
 */
export class TranscriberError extends ExtractionError {
  constructor(
    reason: string,
    detail?: string,
    readonly credentialRefused = false,
    retryable = false,
  ) {
    super(reason, detail, retryable);
  }
}

/** Human names of the kinds, for messages. */
export const KIND_LABEL: Record<DocKind, string> = {
  pdf: 'PDF', docx: 'DOCX', doc: 'DOC', odt: 'ODT', rtf: 'RTF', pptx: 'PPTX',
  xlsx: 'XLSX', xls: 'XLS', csv: 'CSV', ods: 'ODS',
  text: 'text file', markdown: 'Markdown file', html: 'HTML file', json: 'JSON file', xml: 'XML file',
  eml: 'email', msg: 'Outlook message', image: 'image', audio: 'audio file', video: 'video file',
};

/** Limits applied inside the extraction child. */
export interface ChildLimits {
  /** Cap on the total uncompressed size of a zip-based document (OOXML, ODF). */
  maxArchiveBytes: number;
  /** Cap on the number of entries of such an archive. */
  maxArchiveEntries: number;
  /** Cap on the pixels of an image handed to OCR. */
  maxImagePixels: number;
  /** How deep email attachments are followed (an .eml inside an .eml …). */
  maxAttachmentDepth: number;
  /** How many attachments of one message are extracted. */
  maxAttachments: number;
  /** A PDF whose page tree counts more pages than this fails before any page is read. */
  maxPdfPages: number;
}

export const DEFAULT_CHILD_LIMITS: ChildLimits = {
  maxArchiveBytes: 500 * 1024 * 1024,
  maxArchiveEntries: 20_000,
  maxImagePixels: 60_000_000,
  maxAttachmentDepth: 3,
  maxAttachments: 50,
  // Far above any manual a knowledge base indexes; widget uploads get UPLOAD_MAX_PDF_PAGES.
  maxPdfPages: 10_000,
};

/** What the parent hands the child (as one JSON argv element). */
export interface ChildJob {
  filePath: string;
  kind: DocKind;
  mime: string;
  fileName: string;
  ocrLangPath?: string;
  limits: ChildLimits;
}

export type ChildReply =
  | { ok: true; segments: Segment[]; warnings: string[] }
  | { ok: false; reason: string; detail?: string; retryable?: boolean };
