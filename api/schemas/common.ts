import { z } from 'zod';
import type { IdPrefix } from '../../lib/ids';
import { CURSOR_PATTERN } from '../../db/pagination';

export const ErrorBody = z
  .object({
    error: z.string().meta({ description: 'Machine-readable error code' }),
    message: z.string().meta({ description: 'Human-readable explanation; names the offending field for validation errors' }),
  })
  .catchall(z.unknown())
  .meta({ id: 'Error', description: 'Every error response: `{error, message}` plus documented extra fields.' });

/** Error responses every authenticated operation can give. */
export const authErrors = {
  400: ErrorBody.meta({ description: 'invalid_request: body, query or a header failed validation' }),
  401: ErrorBody.meta({ description: 'invalid_api_key or revoked_api_key; with a console session instead of a key, not_signed_in (expired or signed out)' }),
  403: ErrorBody.meta({ description: "insufficient_scope (the key's scopes, or the session's role's); with a console session, csrf_failed on an unsafe request without its X-CSRF-Token or from another origin" }),
  429: ErrorBody.meta({ description: 'rate_limited; see Retry-After and X-RateLimit-* headers' }),
} as const;

/**
 * A path id. The document gives the real form of the resource's ids (prefix + 24 hex), so
 * generated clients and fuzzers send realistic ones; validation stays at 1 to 100
 * characters because ids are opaque and any other string is simply not found (404), as
 * the contract says. A schema-valid id is therefore never refused with 400.
 */
export const idString = (prefix?: IdPrefix) =>
  z
    .string()
    .min(1)
    .max(100)
    .meta({ pattern: `^${prefix ?? '[a-z]{2,4}'}_[0-9a-f]{24}$`, example: `${prefix ?? 'id'}_0a1b2c3d4e5f60718293a4b5` });
export const idParam = (prefix?: IdPrefix) => z.object({ id: idString(prefix) });
export const IdParam = idParam();

/** The marker of a response that is stored bytes (api/stored-bytes.ts); the OpenAPI plugin lists their served types. */
export const STORED_BYTES = 'x-stored-bytes';

/** A response of stored bytes, served with their own content type (never JSON to validate). */
export const StoredBytes = z.any().meta({ [STORED_BYTES]: true });

/** A page position: the `next_cursor` of the previous page. Every value matching the pattern is accepted. */
export const Cursor = z
  .string()
  .regex(CURSOR_PATTERN)
  .meta({ description: 'The `next_cursor` of the previous page (`<unix ms>.<id>`)', example: '1764000000000.agt_0a1b2c3d4e5f60718293a4b5' });

/** A window bound of a report (analytics, usage): an RFC 3339 date-time (with its offset) or a date (midnight UTC). */
export const WindowBound = z.union([z.iso.datetime({ offset: true }), z.iso.date()]);

const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * A timestamp bound of a filter (`since`, `until`). Any RFC 3339 date-time is accepted and
 * normalised to UTC, clamped to the years 1 to 9999: PostgreSQL has no year 0 and refuses
 * offsets past ±15:59, which RFC 3339 allows, and no row lies outside those years anyway.
 */
export const TimestampBound = z.iso
  .datetime({ offset: true })
  .transform((s) => new Date(Math.min(LATEST, Math.max(EARLIEST, Date.parse(s)))).toISOString());
