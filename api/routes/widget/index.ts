import cors from '@fastify/cors';
import type { Services } from '../../../app/services';
import { enforce, type RequestLimits } from '../../../lib/ratelimit';
import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { SiteRow } from '../../../domain/widget/sites';
import { SiteAppearance } from '../../schemas/console-sites';
import { UserContext, tags, widgetErrors } from './common';
import { chatRoutes } from './chat';
import { uploadRoutes } from './uploads';
import { voiceRoutes } from './voice';
import { feedbackRoutes } from './feedback';
import { named } from '../../plugin-name';

const InitBody = z.object({ user_context: UserContext.optional(), conversation_id: z.string().max(100).optional() }).strict();
const InitResult = z
  .object({
    conversation_id: z.string(),
    customer_id: z.string(),
    auth_level: z.enum(['anonymous', 'self_asserted', 'verified']),
    agent: z.object({
      id: z.string(),
      name: z.string(),
      greeting: z.string().optional().meta({ description: "The agent's greeting (web_chat.greeting), when set" }),
      starters: z.array(z.string()).optional().meta({ description: "The agent's starter questions (web_chat.starters), when set" }),
    }),
    handoff: z
      .object({ active: z.boolean().meta({ description: 'A person holds the conversation: the agent does not answer (a handoff frame tells of changes)' }) })
      .meta({ description: 'Who answers the conversation' }),
    team: z
      .object({
        available: z.boolean().meta({ description: 'Someone of the team is available now (not away, within business hours)' }),
        next_available_at: z.string().nullable().meta({ description: 'The next opening when nobody is available (ISO 8601); null when available, away or none within a week' }),
        away_message: z.string().nullable().meta({ description: "The team's away message, while away" }),
        reply_time_minutes: z.number().int().nullable().meta({ description: "The team's typical first reply, in minutes" }),
      })
      .meta({ description: 'What the widget tells a visitor whose conversation a person holds (PUT /api/v1/team/availability)' }),
    capabilities: z.object({ voice_chat: z.boolean(), dial_out: z.boolean(), file_upload: z.boolean() }),
    capability_warnings: z.array(z.string()).optional(),
    response_delivery: z.enum(['stream', 'complete']),
    appearance: SiteAppearance,
  })
  .meta({ id: 'WidgetInit' });

const PublicConfig = z
  .object({
    agent: InitResult.shape.agent.omit({ id: true }),
    appearance: SiteAppearance,
    capabilities: z.object({ file_upload: z.boolean() }).meta({ description: 'What the launcher may offer before a session starts' }),
  })
  .meta({ id: 'WidgetConfig' });

/**
 * The calling page's origin. Browsers leave Origin off same-origin GETs (the /demo page
 * served by this host reading history); there Sec-Fetch-Site, which no page can set,
 * vouches that the Referer (the widget asks for `referrerPolicy: 'origin'`) is the page's.
 */
function pageOrigin(request: FastifyRequest): string | undefined {
  if (request.headers.origin) return request.headers.origin;
  if (request.headers['sec-fetch-site'] !== 'same-origin' || !request.headers.referer) return undefined;
  try {
    return new URL(request.headers.referer).origin;
  } catch {
    return undefined;
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    site: SiteRow | null;
  }
}

/**
 * The public widget API (`/api/public/widget`): authenticated by `X-Concierge-Site`
 * plus the browser's Origin (on the site's list), open to cross-origin calls from any
 * origin without credentials: init here; chat, uploads and voice (sessions and dial-out) in their modules.
 */
export const widgetRoutes: FastifyPluginAsyncZod<{
  services: Pick<Services, 'sites' | 'widget' | 'widgetChat' | 'widgetFiles' | 'widgetVoice' | 'blobs'>;
  limits: RequestLimits;
}> = async (app, opts) => {
  // Any origin may call (the site check decides); never with credentials; the origin is echoed.
  await app.register(cors, { origin: true, credentials: false, allowedHeaders: ['Content-Type', 'X-Concierge-Site'], maxAge: 600 });
  app.decorateRequest('site', null);
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS' || !request.routeOptions.config.site) return;
    // An address that keeps presenting unknown sites or refused origins is answered 429 before the lookup.
    request.site = await opts.limits.widgetRefusals.guard(request.ip, () =>
      opts.services.sites.authenticate(request.headers['x-concierge-site'] as string | undefined, pageOrigin(request)),
    );
    await enforce(opts.limits.widgetClient, `${request.site.id}:${request.ip}`, 'requests per site and client address');
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
    handler: async (request) => opts.services.widget.init(request.site!, request.body),
  });

  app.get('/api/public/widget/config', {
    config: { site: true },
    schema: {
      operationId: 'widgetConfig',
      summary: "The site's look and agent, for the launcher: no session, no conversation",
      description:
        'What the widget shows before the visitor opens it or writes: the agent\'s name, greeting and starters, the site\'s appearance. Nothing is created; POST /init starts the session (the widget calls it on first open or first message, so page views alone open no conversation).',
      tags,
      security: [{ widgetSite: [] }],
      response: { 200: PublicConfig, ...widgetErrors },
    },
    handler: async (request) => opts.services.widget.publicConfig(request.site!),
  });

  await app.register(named(chatRoutes), { services: opts.services, sends: opts.limits.widgetSends });
  await app.register(named(uploadRoutes), { services: opts.services, work: opts.limits.widgetWork });
  await app.register(named(voiceRoutes), { services: opts.services, dialOut: opts.limits.dialOut });
  await app.register(named(feedbackRoutes), { services: opts.services });
};
