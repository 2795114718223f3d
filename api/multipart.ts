import type { FastifyRequest } from 'fastify';
import { DomainError } from '../lib/errors';
import { ApiError } from './http-errors';
import { assertStorable } from './plugins/input';
import type { BlobStore, StagedBlob } from '../domain/ports/blob-store';

/**
 * Streams a multipart body's one `file` part into temporary blob storage (never
 * buffered whole; over `maxBytes` is 413 and nothing stays behind) and collects its
 * text fields (each at most `fieldSize` bytes, 4 KB unless the endpoint needs more). The
 * caller owns the staged blob.
 */
export async function readSingleFile(request: FastifyRequest, blobs: BlobStore, maxBytes: number, opts: { fieldSize?: number } = {}) {
  const fieldSize = opts.fieldSize ?? 4096;
  if (!request.isMultipart()) throw new ApiError(415, 'unsupported_media_type', "Content-Type: this endpoint accepts 'multipart/form-data'");
  let staged: StagedBlob | null = null;
  let fileName = '';
  const fields: Record<string, string> = {};
  /** Fields cut at `fieldSize` (busboy truncates them silently): the caller decides. */
  const truncated: string[] = [];
  try {
    for await (const part of request.parts({ limits: { fileSize: maxBytes, files: 1, fields: 10, fieldSize } })) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || staged) {
          part.file.resume();
          throw new ApiError(400, 'invalid_request', `${part.fieldname}: only one file, in the field 'file'`);
        }
        // The name is stored: the same rule as every JSON string field (no NUL, no lone surrogate).
        assertStorable(part.filename, 'file.filename');
        fileName = part.filename;
        staged = await blobs.stage(part.file, maxBytes);
      } else {
        assertStorable(String(part.value), `body.${part.fieldname}`);
        fields[part.fieldname] = String(part.value);
        if (part.valueTruncated) truncated.push(part.fieldname);
      }
    }
    if (!staged) throw new ApiError(400, 'invalid_request', 'file: required');
    return { staged, fileName, fields, truncated };
  } catch (err) {
    if (staged) await blobs.discard(staged);
    const code = (err as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE' || (err instanceof Error && err.name === 'BlobTooLargeError')) {
      throw new ApiError(413, 'payload_too_large', `file: larger than the ${Math.round(maxBytes / 1024 / 1024)} MB limit`);
    }
    if (code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT') throw new ApiError(400, 'invalid_request', 'body: too many parts');
    // busboy's refusals of a body that is not the multipart it claims (no boundary, truncated, malformed).
    if (!(err instanceof ApiError) && !(err instanceof DomainError) && err instanceof Error && /^(Multipart|Malformed|Unexpected end|Boundary required)|terminated early/i.test(err.message)) {
      throw new ApiError(400, 'invalid_request', `body: malformed multipart/form-data (${err.message})`);
    }
    throw err;
  }
}
