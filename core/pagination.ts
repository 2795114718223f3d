import { ApiError } from './errors';

/**
 * Keyset cursors over (created_at desc, id desc): a position, not an offset, so rows
 * added while a client pages never shift a page (nothing skipped, nothing repeated).
 * Opaque to clients: base64url of the last row's timestamp and id.
 */
export function encodeCursor(row: { created_at: Date | string; id: string }): string {
  return Buffer.from(JSON.stringify([new Date(row.created_at).toISOString(), row.id])).toString('base64url');
}

export function decodeCursor(cursor: string): [createdAt: string, id: string] {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (typeof at === 'string' && typeof id === 'string' && !Number.isNaN(Date.parse(at))) return [at, id];
  } catch {
    // fall through
  }
  throw new ApiError(400, 'invalid_request', 'cursor: not a cursor this endpoint returned');
}
