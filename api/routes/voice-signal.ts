import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { ApiError } from '../http-errors';
import { ErrorBody } from '../schemas/common';
import type { VoiceSignalling } from '../voice-signal';

/**
 * `GET /api/voice/rtc`: the direct voice transport's signalling socket (the voice
 * session's `rtc_url`). Public: the socket authenticates itself with the session's
 * short-lived, single-use rtc_token in its first frame (never in the URL). Sockets are
 * capped per client address before the upgrade (429 rate_limited).
 */
export const voiceSignalRoutes: FastifyPluginAsyncZod<{ signalling: VoiceSignalling | null }> = async (app, opts) => {
  app.route({
    method: 'GET',
    url: '/api/voice/rtc',
    config: { public: true },
    schema: {
      operationId: 'voiceSignal',
      summary: "Voice signalling socket (direct transport): WebSocket upgrade; frames join → joined, offer → answer (see docs/voice.md)",
      tags: ['Widget'],
      response: {
        429: ErrorBody.meta({ description: 'rate_limited: too many signalling sockets open from this client address (VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS, 20 by default), with Retry-After' }),
        426: ErrorBody.meta({ description: 'upgrade_required: a plain GET without the WebSocket upgrade' }),
        503: ErrorBody.meta({ description: 'voice_unavailable: this server does not signal direct voice sessions' }),
      },
    },
    preHandler: async (request) => {
      if (!opts.signalling) throw new ApiError(503, 'voice_unavailable', 'Direct voice signalling is not available on this server');
      // Only a real upgrade takes a socket slot (a plain GET ends in 426 below); before any lookup.
      if (request.ws) opts.signalling.reserve(request.ip, request.raw.socket);
    },
    handler: async () => {
      throw new ApiError(426, 'upgrade_required', 'GET /api/voice/rtc is a WebSocket endpoint: send an upgrade request', {}, { Upgrade: 'websocket' });
    },
    wsHandler: (socket) => {
      opts.signalling!.attach(socket);
    },
  });
};
