import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../http-errors';

/**
 * Bodies nested deeper than this are refused before validation. The deepest document the
 * API accepts (an agent spec) is about six levels; recursive code downstream (the
 * idempotency fingerprint, validation, JSONB) must never meet a stack-exhausting body.
 * (V8's JSON.parse itself is iterative, so parsing such a body is safe; using it is not.)
 */
export const MAX_JSON_DEPTH = 32;

/** Headers whose values reach the database (site look-up, idempotency keys). */
const STORED_HEADERS = ['x-concierge-site', 'idempotency-key'] as const;

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why a string cannot be accepted, or null. PostgreSQL cannot store U+0000 in text or
 * JSONB, and a lone UTF-16 surrogate has no UTF-8 encoding (the driver would send
 * U+FFFD, silently changing what was stored).
 */
export function badString(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(s)) return 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)';
  return null;
}

const describeKey = (key: string) => (/^[\w-]*$/.test(key) && key !== '' ? key : JSON.stringify(key));

/**
 * The first problem in `value` as `where.path: reason`, or null: a string (value or
 * object key) that cannot be stored, or nesting deeper than `maxDepth`. Iterative, so a
 * hostile depth cannot exhaust the stack here either.
 */
export function findBadInput(value: unknown, where: string, maxDepth = MAX_JSON_DEPTH): string | null {
  const stack: Array<[unknown, string, number]> = [[value, where, 0]];
  while (stack.length > 0) {
    const [v, at, depth] = stack.pop()!;
    if (typeof v === 'string') {
      const reason = badString(v);
      if (reason) return `${at}: ${reason}`;
    } else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      if (depth >= maxDepth) return `${where}: nested deeper than ${maxDepth} levels`;
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${at}.${i}`, depth + 1]);
        continue;
      }
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i];
        const keyReason = badString(key);
        if (keyReason) return `${at}: property name ${JSON.stringify(key)} ${keyReason}`;
        stack.push([child, `${at}.${describeKey(key)}`, depth + 1]);
      }
    }
  }
  return null;
}

/** Throws 400 invalid_request naming the field when `value` holds a string that cannot be stored. */
export function assertStorable(value: unknown, where: string): void {
  const problem = findBadInput(value, where);
  if (problem) throw new ApiError(400, 'invalid_request', problem);
}

/**
 * No 5xx on bad input, once for every route: no body nested deeper than MAX_JSON_DEPTH,
 * and no string in the body, query, path parameters or stored headers holding something
 * PostgreSQL cannot store. Runs after authentication (onRequest) and before schema
 * validation and the idempotency fingerprint, so the client learns which field to fix.
 * (Routes parse their own bodies only behind a signature check: the msgapp webhook.)
 */
export const inputPlugin = fp(async (app: FastifyInstance) => {
  app.addHook('onRequest', async (request) => {
    for (const name of STORED_HEADERS) {
      const value = request.headers[name];
      if (value !== undefined) assertStorable(value, `headers.${name}`);
    }
  });

  app.addHook('preValidation', async (request) => {
    assertStorable(request.params, 'params');
    assertStorable(request.query, 'querystring');
    if (request.body !== undefined && !request.isMultipart()) assertStorable(request.body, 'body');
  });
});
