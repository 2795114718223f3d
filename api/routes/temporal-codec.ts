import { createHash, timingSafeEqual } from 'node:crypto';
import cors from '@fastify/cors';
import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Payload, PayloadCodec } from '../../lib/crypto/payload-codec';
import { ApiError } from '../http-errors';

export const CODEC_PREFIX = '/api/temporal-codec';

export interface TemporalCodecOptions {
  codec: PayloadCodec;
  /** TEMPORAL_CODEC_TOKEN; null: the endpoint is off (404). */
  token: string | null;
  /** TEMPORAL_UI_ORIGIN: the only origins a browser may call from. */
  uiOrigins: string[];
}

/** Payloads as protobuf JSON (Temporal's remote codec protocol): metadata values and data in base64. */
const Base64 = z.string().max(64 * 1024 * 1024).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
const JsonPayload = z.object({ metadata: z.record(z.string(), Base64).nullish(), data: Base64.nullish() });
// An empty list is omitted by protobuf JSON: the CLI encodes a query without arguments as `{}` (`temporal workflow metadata`).
const Body = z.object({ payloads: z.array(JsonPayload).max(10_000).default([]) });
type JsonPayloadT = z.infer<typeof JsonPayload>;

const fromJson = (p: JsonPayloadT): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});
const toJson = (p: Payload) => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  data: Buffer.from(p.data ?? []).toString('base64'),
});

/** Equal strings, compared in constant time (digests first, so the length does not leak either). */
function sameToken(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest());
}

/**
 * Temporal's remote codec endpoint for operators: the Web UI (its "Codec Server" setting,
 * or `--ui-codec-endpoint`) and the CLI (`--codec-endpoint … --codec-auth 'Bearer …'`) POST
 * `{payloads}` to `…/decode` (and `…/encode`) and get them back decoded with the service's
 * payload key, so histories can be read without the key leaving the service.
 *
 * Decoded payloads are every tenant's customer text: the endpoint is off unless
 * TEMPORAL_CODEC_TOKEN is set, and then wants that token, as `Authorization: Bearer …` or,
 * for a browser UI that cannot add a header (the embedded dev server's), as the path
 * segment before `/decode` (the protocol only reads the last segment; the API's logs
 * redact it). Browsers may call only from TEMPORAL_UI_ORIGIN. The same codec serves every
 * namespace (X-Namespace is not needed to pick a key).
 */
export const temporalCodecRoutes: FastifyPluginAsyncZod<TemporalCodecOptions> = async (app, opts) => {
  // Registered under the prefix, so its preflight route is `/api/temporal-codec/*` (the widget's `*` stays the widget's),
  // and its hook answers preflights before the token check below.
  await app.register(cors, {
    origin: opts.uiOrigins,
    methods: ['POST'],
    allowedHeaders: ['Authorization', 'Content-Type', 'X-Namespace'],
    credentials: false,
    maxAge: 600,
  });

  // Before the body is read: an unauthenticated caller never gets 8 MB parsed.
  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (request.method === 'OPTIONS') return;
    if (!opts.token) throw new ApiError(404, 'not_found', 'The Temporal codec endpoint is off: set TEMPORAL_CODEC_TOKEN to enable it');
    const header = request.headers.authorization;
    const bearer = typeof header === 'string' && /^Bearer\s+/i.test(header) ? header.replace(/^Bearer\s+/i, '').trim() : null;
    const inPath = (request.params as { token?: string }).token ?? null;
    const given = bearer ?? inPath;
    if (!given || !sameToken(given, opts.token)) {
      throw new ApiError(401, 'invalid_codec_token', 'Authorization: Bearer <TEMPORAL_CODEC_TOKEN> is missing or wrong', {}, { 'WWW-Authenticate': 'Bearer' });
    }
  });

  const route = (op: 'encode' | 'decode') => ({
    config: { public: true },
    bodyLimit: 8 * 1024 * 1024,
    schema: { hide: true, body: Body },
    handler: async (request: FastifyRequest) => {
      const { payloads } = request.body as z.infer<typeof Body>;
      const out: Payload[] = [];
      // One at a time, so a payload that cannot be decoded is named by its index.
      for (const [i, p] of payloads.entries()) {
        try {
          out.push(...(await (op === 'encode' ? opts.codec.encode([fromJson(p)]) : opts.codec.decode([fromJson(p)]))));
        } catch (err) {
          throw new ApiError(400, 'undecodable_payload', `payloads[${i}]: ${(err as Error).message}`);
        }
      }
      return { payloads: out.map(toJson) };
    },
  });
  for (const op of ['encode', 'decode'] as const) {
    app.post(`/${op}`, route(op));
    app.post(`/:token/${op}`, route(op));
  }
};
