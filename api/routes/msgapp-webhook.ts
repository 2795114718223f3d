import type { FastifyPluginAsync } from 'fastify';
import type { Services } from '../../app/services';
import { z } from 'zod';
import { ApiError } from '../http-errors';
import { assertStorable } from '../plugins/input';
import { WebhookPayloadError } from '../../domain/ports/msgapp';
import { openLink } from '../../domain/storage/signed-links';
import { sendStoredBytes } from '../stored-bytes';

export interface MsgappWebhookOptions {
  services: Pick<Services, 'providerWebhook' | 'msgappWebhooks' | 'box' | 'blobs'>;
  /** The app secret that signs the provider's callbacks (X-Hub-Signature-256). */
  appSecret: string | null;
  /** What the provider's verification handshake must present. */
  verifyToken: string | null;
}

/**
 * The provider's webhook (`/webhooks/msgapp`), authenticated by signature, not by API
 * key: the verification handshake, then signed notifications of statuses and inbound
 * messages. A bad or missing signature is 401 and nothing is recorded. The body is
 * read raw (this plugin's own JSON parser) because the signature covers the bytes.
 * The answer comes fast and only once everything is committed: statuses applied and
 * inbound messages stored (once per provider message id; one without media recorded
 * with its `message.inbound`), batched with the callbacks that arrive together
 * (domain/messaging/provider-webhook.ts); the relay hands each on.
 */
export const msgappWebhookRoutes: FastifyPluginAsync<MsgappWebhookOptions> = async (app, opts) => {
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.get('/webhooks/msgapp', {
    config: { public: true },
    schema: { hide: true },
    handler: async (request, reply) => {
      const q = request.query as Record<string, string | undefined>;
      if (!opts.verifyToken) throw new ApiError(503, 'messaging_unavailable', 'MSGAPP_VERIFY_TOKEN is not configured');
      if (q['hub.mode'] !== 'subscribe' || q['hub.verify_token'] !== opts.verifyToken || !q['hub.challenge']) {
        throw new ApiError(403, 'forbidden', 'verification failed: wrong hub.mode or hub.verify_token');
      }
      return reply.type('text/plain').send(q['hub.challenge']);
    },
  });

  app.post('/webhooks/msgapp', {
    config: { public: true },
    schema: { hide: true },
    handler: async (request, reply) => {
      if (!opts.appSecret) throw new ApiError(503, 'messaging_unavailable', 'MSGAPP_APP_SECRET is not configured');
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      if (!opts.services.msgappWebhooks.verifySignature(raw, request.headers['x-hub-signature-256'] as string | undefined, opts.appSecret)) {
        throw new ApiError(401, 'invalid_signature', 'X-Hub-Signature-256 does not match the body');
      }
      let parsed;
      try {
        const json: unknown = JSON.parse(raw.toString('utf8'));
        // Signed, but still input: a NUL or lone surrogate PostgreSQL cannot store is a 400, not a 500.
        assertStorable(json, 'body');
        parsed = opts.services.msgappWebhooks.parse(json);
      } catch (err) {
        if (err instanceof SyntaxError || err instanceof WebhookPayloadError) throw new ApiError(400, 'invalid_request', `body: ${(err as Error).message}`);
        throw err;
      }
      // Statuses applied and messages stored, in batches with the callbacks that arrive meanwhile.
      await opts.services.providerWebhook.receive(parsed, request.log);
      return reply.code(200).send({ received: true });
    },
  });

  app.get('/api/media/:token', {
    config: { public: true },
    schema: { hide: true, params: z.object({ token: z.string().min(10).max(4000) }) },
    handler: async (request, reply) => {
      const link = openLink(opts.services.box, (request.params as { token: string }).token);
      if (!link) throw new ApiError(403, 'forbidden', 'This media link is invalid or has expired');
      const blob = await opts.services.blobs.read(link.sha256);
      if (!blob) throw new ApiError(410, 'media_gone', 'The file behind this media link is no longer stored');
      return sendStoredBytes(reply, blob, { mime: link.mime, name: link.name });
    },
  });
};
