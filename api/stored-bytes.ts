import type { FastifyReply } from 'fastify';
import type { Readable } from 'node:stream';

/**
 * How bytes that users or customers stored (knowledge-base files, inbound msgapp media,
 * widget uploads) are served back from the API's own origin. Their type was declared by
 * someone else (an inbound "image" can say text/html; an SVG sticker carries script), so
 * they are never rendered here: always an attachment, never sniffed, in a CSP sandbox,
 * and typed only from an allow-list of formats browsers do not run; anything else is
 * application/octet-stream. The saved file's extension follows the served type, not the
 * stored name (downloadName).
 */

/** Served content types, with the extension a nameless download gets. */
const SERVED_TYPES: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
  'image/tiff': 'tiff',
  'audio/ogg': 'ogg',
  'audio/opus': 'opus',
  'audio/mpeg': 'mp3',
  'audio/mp4': 'm4a',
  'audio/x-m4a': 'm4a',
  'audio/aac': 'aac',
  'audio/amr': 'amr',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/vnd.wave': 'wav',
  'video/mp4': 'mp4',
  'video/3gpp': '3gp',
  'video/webm': 'webm',
  'application/pdf': 'pdf',
  'text/plain': 'txt',
  'text/markdown': 'md',
  'text/csv': 'csv',
  'text/tab-separated-values': 'tsv',
  'application/json': 'json',
  'application/rtf': 'rtf',
  'message/rfc822': 'eml',
  'application/msword': 'doc',
  'application/vnd.ms-excel': 'xls',
  'application/vnd.ms-powerpoint': 'ppt',
  'application/vnd.ms-outlook': 'msg',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation': 'pptx',
  'application/vnd.oasis.opendocument.text': 'odt',
  'application/vnd.oasis.opendocument.spreadsheet': 'ods',
};

const OCTET_STREAM = 'application/octet-stream';

/** Every content type stored bytes can be served with (what the OpenAPI document lists for a download). */
export const SERVED_CONTENT_TYPES: readonly string[] = [...Object.keys(SERVED_TYPES), OCTET_STREAM];

/** The declared type when it is on the allow-list (parameters such as codecs dropped), else application/octet-stream. */
export function servedContentType(declared: string | null | undefined): string {
  const essence = (declared ?? '').split(';')[0].trim().toLowerCase();
  return essence in SERVED_TYPES ? essence : OCTET_STREAM;
}

/** RFC 6266: an ASCII fallback plus the exact UTF-8 name. */
export function contentDisposition(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Other extensions a name may keep for a served type (the canonical one is SERVED_TYPES'). */
const OTHER_EXTENSIONS: Record<string, readonly string[]> = {
  'image/jpeg': ['jpeg', 'jpe'],
  'image/tiff': ['tif'],
  'audio/ogg': ['oga', 'opus'],
  'audio/opus': ['ogg'],
  'audio/mpeg': ['mpga'],
  'audio/mp4': ['mp4'],
  'video/mp4': ['m4v'],
  'text/plain': ['text', 'log'],
  'text/markdown': ['markdown'],
};

/** What a download of a served type is saved as: SERVED_TYPES' extension, `bin` for application/octet-stream. */
function extensionOf(servedType: string): string {
  return SERVED_TYPES[servedType] ?? 'bin';
}

/**
 * The stored name with an extension that says what is served: the name's own when it is
 * one of the served type's, else the name's last extension replaced by the type's (PNG
 * bytes named `evil.html` download as `evil.png`; anything served as octet-stream as
 * `.bin`). The name was chosen by whoever stored the bytes, and the saved file's extension
 * decides what the recipient's system opens it with. No name: `download.<ext>`.
 */
export function downloadName(name: string | null | undefined, servedType: string): string {
  const trimmed = (name ?? '').trim();
  const ext = extensionOf(servedType);
  // The last extension, not a leading dot (".profile" has none).
  const m = /^(.+?)\.([^.]*)$/.exec(trimmed);
  const stem = m ? m[1] : trimmed;
  const own = m ? m[2].toLowerCase() : null;
  if (own !== null && (own === ext || OTHER_EXTENSIONS[servedType]?.includes(own))) return trimmed;
  return `${stem || 'download'}.${ext}`;
}

/** Sends stored bytes with the headers above. */
export function sendStoredBytes(reply: FastifyReply, blob: { stream: Readable; size: number }, meta: { mime: string | null | undefined; name?: string | null }): FastifyReply {
  const type = servedContentType(meta.mime);
  return reply
    .header('Content-Type', type)
    .header('Content-Length', String(blob.size))
    .header('Content-Disposition', contentDisposition(downloadName(meta.name, type)))
    .header('X-Content-Type-Options', 'nosniff')
    .header('Content-Security-Policy', 'sandbox')
    .send(blob.stream);
}
