import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../http-errors';
import { requestFingerprint, type IdempotencyStore } from '../../domain/idempotency/store';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * `Idempotency-Key` on POST (Stripe semantics): the same key and request replay the
 * stored response (`Idempotent-Replayed: true`); the same key with another request is
 * 409 `idempotency_conflict`. Requests that fail validation are not stored (the
 * endpoint never started); 5xx responses release the key so a retry runs again.
 */
export const idempotencyPlugin = fp(async (app: FastifyInstance, opts: { store: IdempotencyStore }) => {
  app.decorateRequest('idempotency', null);

  // The fingerprint is taken from the body as parsed, before validation reshapes it.
  app.addHook('preValidation', async (request) => {
    // JSON bodies only: a multipart upload has no parsed body to compare (uploads are content-addressed anyway).
    if (request.method !== 'POST' || !request.auth || request.isMultipart()) return;
    const header = request.headers['idempotency-key'];
    if (header === undefined) return;
    if (Array.isArray(header) || !KEY_PATTERN.test(header)) {
      throw new ApiError(400, 'invalid_request', 'Idempotency-Key: must be 1 to 255 printable ASCII characters');
    }
    request.idempotency = {
      workspaceId: request.auth.workspaceId,
      key: header,
      fingerprint: requestFingerprint(request.method, request.url, request.body),
      claimed: false,
    };
  });

  app.addHook('preHandler', async (request, reply) => {
    const idem = request.idempotency;
    if (!idem?.fingerprint) return;
    const outcome = await opts.store.begin(idem.workspaceId, idem.key, idem.fingerprint);
    switch (outcome.kind) {
      case 'proceed':
        idem.claimed = true;
        return;
      case 'mismatch':
        throw new ApiError(409, 'idempotency_conflict', 'Idempotency-Key: already used with a different request; use a new key');
      case 'in_progress':
        throw new ApiError(409, 'idempotency_conflict', 'Idempotency-Key: a request with this key is still in progress; retry later');
      case 'replay':
        reply.header('Idempotent-Replayed', 'true');
        if (outcome.contentType) reply.header('Content-Type', outcome.contentType);
        return reply.code(outcome.status).send(outcome.body);
    }
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const idem = request.idempotency;
    if (!idem?.claimed) return payload;
    idem.claimed = false;
    if (reply.statusCode >= 500) {
      await opts.store.release(idem.workspaceId, idem.key);
    } else {
      const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : '';
      const contentType = reply.getHeader('content-type');
      await opts.store.complete(idem.workspaceId, idem.key, reply.statusCode, body, contentType ? String(contentType) : null);
    }
    return payload;
  });

  // A request whose client went away before a response was sent must not hold its key.
  app.addHook('onResponse', async (request) => {
    const idem = request.idempotency;
    if (idem?.claimed) await opts.store.release(idem.workspaceId, idem.key);
  });
});
