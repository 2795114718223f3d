import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../../http-errors';
import type { RefusalLimiter } from '../../../lib/ratelimit';
import { ErrorBody } from '../../schemas/common';
import type { ChatHub, CheckedGrant } from '../../chat-hub';

const ConnectQuery = z.object({
  site_id: z.string().min(1).max(100).meta({ pattern: '^site_[0-9a-f]{24}$', description: 'The public site id (browsers cannot set headers on an upgrade)' }),
  conversation_id: z.string().min(1).max(100).meta({ pattern: '^conv_[0-9a-f]{24}$' }),
  /** The last message id the client has: replies written after it are sent first. */
  after: z.string().min(1).max(100).optional(),
});

declare module 'fastify' {
  interface FastifyRequest {
    chatGrant: CheckedGrant | null;
  }
}

/**
 * The widget's receive-only reply socket, `GET /api/chat/connect`. Credentials are query
 * parameters (browsers cannot set headers on an upgrade) plus the upgrade's Origin. Every
 * check runs before the upgrade, so a refusal is a plain HTTP 400/403/503 with the usual
 * error body; the socket itself never carries an error. Not key-authenticated (`public`):
 * it authenticates itself, by site, Origin and conversation.
 *
 * Limits come before work: an address over its refused-handshake budget, and a
 * conversation or address holding its cap of sockets, get 429 `rate_limited` before any
 * lookup.
 */
export const chatSocketRoutes: FastifyPluginAsyncZod<{ hub: ChatHub | null; refusals: RefusalLimiter }> = async (app, opts) => {
  const { hub, refusals } = opts;
  app.decorateRequest('chatGrant', null);

  app.route({
    method: 'GET',
    url: '/api/chat/connect',
    config: { public: true },
    // Documented (docs/decisions.md "Everywhere"): the 101 response and its frames are added by the OpenAPI plugin.
    schema: {
      operationId: 'chatConnect',
      summary: 'Reply socket: WebSocket upgrade, receive-only, bound to one conversation',
      tags: ['Widget'],
      querystring: ConnectQuery,
      response: {
        400: ErrorBody.meta({ description: 'invalid_request: site_id or conversation_id missing or malformed' }),
        403: ErrorBody.meta({ description: 'unknown site, suspended site, Origin not allowed, or a conversation not of this site' }),
        426: ErrorBody.meta({ description: 'upgrade_required: a plain GET without the WebSocket upgrade' }),
        503: ErrorBody.meta({ description: 'socket_unavailable: this server holds no reply sockets' }),
      },
    },
    // After query validation (rule 1's 400 first), before the upgrade.
    preHandler: async (request) => {
      if (!hub) throw new ApiError(503, 'socket_unavailable', 'Reply sockets are not available on this server');
      const q = request.query;
      request.chatGrant = await refusals.guard(request.ip, async () => {
        // Only a real upgrade takes a socket slot (a plain GET ends in 426 below).
        if (request.ws) hub.reserve(q.conversation_id, request.ip, request.raw.socket);
        return hub.authorize({ siteId: q.site_id, origin: request.headers.origin, conversationId: q.conversation_id });
      });
    },
    handler: async () => {
      throw new ApiError(426, 'upgrade_required', 'GET /api/chat/connect is a WebSocket endpoint: send an upgrade request', {}, { Upgrade: 'websocket' });
    },
    wsHandler: async (socket, request) => {
      await hub!.attach(socket, request.chatGrant!, (request.query as z.infer<typeof ConnectQuery>).after);
    },
  });
};
