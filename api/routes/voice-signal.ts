import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { ApiError } from '../../core/errors';
import { ErrorBody } from '../schemas/common';
import type { VoiceSignalling } from '../voice-signal';

/**
 * `GET /api/voice/rtc`: the direct voice transport's signalling socket (the voice
 * session's `rtc_url`). Public: the socket authenticates itself with the session's
 * short-lived rtc_token in its first frame (never in the URL).
 */
export const voiceSignalRoutes: FastifyPluginAsyncZod<{ signalling: VoiceSignalling | null }> = async (app, opts) => {
  app.route({
    method: 'GET',
    url: '/api/voice/rtc',
    config: { public: true },
    schema: {
      operationId: 'voiceSignal',
      summary: "Voice signalling socket (direct transport): WebSocket upgrade; frames join → joined, offer → answer (see the README's Voice section)",
      tags: ['Widget'],
      response: {
        426: ErrorBody.meta({ description: 'upgrade_required: a plain GET without the WebSocket upgrade' }),
        503: ErrorBody.meta({ description: 'voice_unavailable: this server does not signal direct voice sessions' }),
      },
    },
    preHandler: async () => {
      if (!opts.signalling) throw new ApiError(503, 'voice_unavailable', 'Direct voice signalling is not available on this server');
    },
    handler: async () => {
      throw new ApiError(426, 'upgrade_required', 'GET /api/voice/rtc is a WebSocket endpoint: send an upgrade request', {}, { Upgrade: 'websocket' });
    },
    wsHandler: (socket) => {
      opts.signalling!.attach(socket);
    },
  });
};
