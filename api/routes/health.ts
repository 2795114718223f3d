import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';

export const healthRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get('/healthz', {
    config: { public: true },
    schema: { hide: true, response: { 200: z.object({ ok: z.literal(true) }) } },
    handler: async () => ({ ok: true as const }),
  });
};
