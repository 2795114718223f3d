import cors from '@fastify/cors';
import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { ApiError } from '../../../core/errors';
import { z } from 'zod';
import type { SiteRow } from '../../../core/widget/sites';
import { ErrorBody } from '../../schemas/common';

const UserContext = z
  .object({
    external_id: z.string().min(1).max(200).optional(),
    user_hash: z.string().max(200).optional(),
    phone: z.string().max(32).optional(),
    email: z.string().max(320).optional(),
  })
  .strict();

const InitBody = z.object({ user_context: UserContext.optional(), conversation_id: z.string().max(100).optional() }).strict();
const InitResult = z
  .object({
    conversation_id: z.string(),
    customer_id: z.string(),
    auth_level: z.enum(['anonymous', 'self_asserted', 'verified']),
    agent: z.object({ id: z.string(), name: z.string() }),
    capabilities: z.object({ voice_chat: z.boolean(), dial_out: z.boolean(), file_upload: z.boolean() }),
    capability_warnings: z.array(z.string()).optional(),
    response_delivery: z.enum(['stream', 'complete']),
  })
  .meta({ id: 'WidgetInit' });

declare module 'fastify' {
  interface FastifyRequest {
    site: SiteRow | null;
  }
}

const tags = ['Widget'];
const widgetErrors = {
  400: ErrorBody.meta({ description: 'missing_site_id, invalid_request' }),
  403: ErrorBody.meta({ description: 'site_suspended, origin_not_allowed, identity_verification_required, identity_verification_failed' }),
  404: ErrorBody.meta({ description: 'unknown_site' }),
  503: ErrorBody.meta({ description: 'no_workflow_configured: the site is not bound to a published agent' }),
} as const;

/**
 * The public widget API (`/api/public/widget`): authenticated by `X-Concierge-Site`
 * plus the browser's Origin (on the site's list), open to cross-origin calls from any
 * origin without credentials. Built so far: init. The rest of the widget API comes with
 * the conversation actor.
 */
export const widgetRoutes: FastifyPluginAsyncZod = async (app) => {
  // Any origin may call (the site check decides); never with credentials; the origin is echoed.
  await app.register(cors, { origin: true, credentials: false, allowedHeaders: ['Content-Type', 'X-Concierge-Site'], maxAge: 600 });
  app.decorateRequest('site', null);
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS' || !request.routeOptions.config.site) return;
    request.site = await app.services.sites.authenticate(request.headers['x-concierge-site'] as string | undefined, request.headers.origin);
  });

  app.post('/api/public/widget/init', {
    config: { site: true },
    schema: {
      operationId: 'widgetInit',
      summary: 'Open a visitor session: conversation, identity level, agent and capabilities',
      tags,
      security: [{ widgetSite: [] }],
      body: InitBody.optional(),
      response: { 200: InitResult, ...widgetErrors },
    },
    handler: async (request) => app.services.widget.init(request.site!, request.body),
  });

  // The rest of the widget contract: site-authenticated like init, then 501 until built.
  for (const [method, url] of PLANNED_WIDGET) {
    app.route({
      method,
      url,
      config: { site: true },
      schema: {
        operationId: `widget${url
          .replace('/api/public/widget/', '')
          .split(/[/_]/)
          .filter((p) => p && !p.startsWith(':'))
          .map((p) => p[0].toUpperCase() + p.slice(1))
          .join('')}${method === 'GET' ? 'Get' : ''}`,
        summary: 'Not built yet: answers 501 not_implemented after the site checks',
        tags,
        response: { ...widgetErrors, 501: ErrorBody.meta({ description: 'not_implemented' }) },
      },
      handler: async () => {
        throw new ApiError(501, 'not_implemented', `${method} ${url.replace(/:(\w+)/g, '{$1}')} is part of the widget contract but not built yet in this release`);
      },
    });
  }
};

const PLANNED_WIDGET: Array<['GET' | 'POST', string]> = [
  ['POST', '/api/public/widget/send'],
  ['GET', '/api/public/widget/history'],
  ['GET', '/api/public/widget/conversations'],
  ['POST', '/api/public/widget/conversations/new'],
  ['POST', '/api/public/widget/upload'],
  ['GET', '/api/public/widget/upload/:upload_id'],
  ['POST', '/api/public/widget/file_url'],
  ['POST', '/api/public/widget/transcribe'],
  ['GET', '/api/public/widget/tasks'],
  ['POST', '/api/public/widget/tasks/cancel'],
  ['POST', '/api/public/widget/voice/start'],
  ['POST', '/api/public/widget/voice/inject_text'],
  ['POST', '/api/public/widget/voice/stop'],
  ['POST', '/api/public/widget/call'],
];
