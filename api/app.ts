import { randomBytes } from 'node:crypto';
import fp from 'fastify-plugin';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import multipart from '@fastify/multipart';
import websocket from '@fastify/websocket';
import cookie from '@fastify/cookie';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from '@fastify/type-provider-zod';
import type { RequestLimits } from '../lib/ratelimit';
import type { Services } from '../app/services';
import './types';
import { authPlugin } from './plugins/auth';
import { clientErrorHandler, errorsPlugin, frameworkErrors } from './plugins/errors';
import { REDACT_PATHS, REDACTED, serializeRequest } from './logging';
import { inputPlugin } from './plugins/input';
import { registerMethodNotAllowed } from './plugins/methods';
import { idempotencyPlugin } from './plugins/idempotency';
import { openapiPlugin } from './plugins/openapi';
import { metricsPlugin } from './plugins/metrics';
import { fileRoutes } from './routes/kb/files';
import { folderRoutes } from './routes/kb/folders';
import { healthRoutes } from './routes/health';
import { CODEC_PREFIX, temporalCodecRoutes, type TemporalCodecOptions } from './routes/temporal-codec';
import { agentRoutes } from './routes/agents';
import { conversationRoutes } from './routes/conversations';
import { analyticsRoutes } from './routes/analytics';
import { billingRoutes } from './routes/billing';
import { mcpServerRoutes } from './routes/mcp-servers';
import { credentialRoutes } from './routes/credentials';
import { supportRoutes } from './routes/support';
import { teamRoutes } from './routes/team';
import { customerRoutes } from './routes/customers';
import { messageRoutes } from './routes/messages';
import { widgetRoutes } from './routes/widget';
import { chatSocketRoutes } from './routes/widget/socket';
import { voiceSignalRoutes } from './routes/voice-signal';
import type { VoiceSignalling } from './voice-signal';
import type { ChatHub } from './chat-hub';
import { widgetAssetRoutes } from './routes/widget-assets';
import { consoleAssetRoutes } from './routes/console-assets';
import { msgappWebhookRoutes, type MsgappWebhookOptions } from './routes/msgapp-webhook';
import { documentRoutes } from './routes/documents';
import { webhookRoutes } from './routes/webhooks/subscriptions';
import { consoleRoutes } from './routes/console';
import { consoleInboxRoutes } from './routes/console/inbox';
import type { InboxHub } from './inbox-hub';
import { named } from './plugin-name';

export interface AppDeps {
  services: Services;
  limits: RequestLimits;
  bodyLimitBytes: number;
  /** The provider webhook's secrets; absent: /webhooks/msgapp answers 503. */
  msgappWebhook?: Omit<MsgappWebhookOptions, 'services'>;
  /** Largest knowledge-base upload (streamed, never buffered). */
  maxUploadBytes?: number;
  logger?: FastifyServerOptions['logger'];
  /** This process's widget reply sockets; absent: /api/chat/connect answers 503 socket_unavailable. */
  chatHub?: ChatHub | null;
  /** This process's console inbox streams; absent: GET /api/console/inbox/stream answers 503 stream_unavailable. */
  inboxHub?: InboxHub | null;
  /** The direct voice transport's signalling; absent: /api/voice/rtc answers 503. */
  voiceSignalling?: VoiceSignalling | null;
  /** Temporal's remote codec for the UI and CLI (api/routes/temporal-codec.ts); absent: /api/temporal-codec answers 404. */
  temporalCodec?: TemporalCodecOptions | null;
  /** METRICS_TOKEN: GET /metrics on this port wants it as a bearer; absent or null: /metrics answers 404 (requests are counted either way). */
  metricsToken?: string | null;
}

/**
 * Log options shared by every process: nothing that works as a credential. Request URLs
 * are logged with media tokens and credential-like query values redacted (see
 * api/logging.ts); credential headers are censored wherever a log call puts them.
 */
export function loggerOptions(level: string): Exclude<FastifyServerOptions['logger'], boolean | undefined> {
  return {
    level,
    serializers: { req: serializeRequest as never },
    redact: { paths: REDACT_PATHS, censor: REDACTED },
  };
}

/**
 * The API as one Fastify instance: external plugins, then app plugins (errors, the
 * deny-by-default auth guard, idempotency, OpenAPI), then the routes. The auth guard
 * must be registered before any route so its onRoute check sees every one of them.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger ?? false,
    bodyLimit: deps.bodyLimitBytes,
    genReqId: () => `req_${randomBytes(12).toString('hex')}`,
    requestIdHeader: false,
    return503OnClosing: true,
    // Signed media links carry their claims in the path.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2048 },
    // Errors raised before any route runs (router, Node's HTTP parser) use the same envelope.
    frameworkErrors,
    clientErrorHandler,
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // JSON only: a text/plain body on a JSON endpoint is a 415, not a string to validate.
  app.removeContentTypeParser('text/plain');
  // Each route plugin receives the services it uses as options (encapsulated), never a locator on the app.
  const services = deps.services;
  const inFlight = new Map<string, { method: string; url: string; since: number }>();
  app.decorate('inFlightRequests', () => [...inFlight.values()].map((r) => ({ method: r.method, url: r.url.split('?')[0], seconds: (Date.now() - r.since) / 1000 })));
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
    inFlight.set(request.id, { method: request.method, url: request.url, since: Date.now() });
  });
  // Shutdown drains: a keep-alive connection whose request was in flight when close began
  // is closed once its answer is out, instead of idling until keepAliveTimeout (72 s).
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.addHook('onResponse', async (request) => {
    inFlight.delete(request.id);
    if (closing) setImmediate(() => app.server.closeIdleConnections());
  });
  app.addHook('onRequestAbort', async (request) => void inFlight.delete(request.id));

  // Multipart bodies are streamed by the handlers that accept them (uploads), part by part.
  await app.register(multipart);
  // Before any route: the plugin wraps every route's handler to dispatch upgrades.
  // Sockets are receive-only, so a client frame bigger than this is refused (1009).
  // 64 KB: a browser's SDP offer with its candidates (voice signalling); the chat socket is receive-only.
  await app.register(websocket, { options: { maxPayload: 65_536 } });
  await app.register(errorsPlugin);
  // The console's session cookie, parsed before the auth guard reads it (api/plugins/auth.ts).
  await app.register(cookie);
  await app.register(authPlugin, { apiKeys: deps.services.apiKeys, sessions: deps.services.sessions, limits: deps.limits, publicBaseUrl: deps.services.publicBaseUrl });
  await app.register(inputPlugin);
  await app.register(idempotencyPlugin, { store: deps.services.idempotency });
  await app.register(openapiPlugin, { models: services.models });
  await app.register(metricsPlugin, { token: deps.metricsToken ?? null });

  await app.register(named(healthRoutes));
  await app.register(named(folderRoutes), { services });
  await app.register(named(fileRoutes), { services, maxUploadBytes: deps.maxUploadBytes });
  await app.register(named(webhookRoutes), { services });
  await app.register(named(agentRoutes), { services });
  await app.register(named(customerRoutes), { services });
  await app.register(named(credentialRoutes), { services });
  await app.register(named(supportRoutes), { services });
  await app.register(named(teamRoutes), { services });
  await app.register(named(conversationRoutes), { services, dialOut: deps.limits.dialOut });
  await app.register(named(analyticsRoutes), { services });
  await app.register(named(billingRoutes), { services });
  await app.register(named(mcpServerRoutes), { services });
  await app.register(named(messageRoutes), { services });
  await app.register(named(widgetRoutes), { services, limits: deps.limits });
  await app.register(named(voiceSignalRoutes), { signalling: deps.voiceSignalling ?? null });
  await app.register(named(chatSocketRoutes), { hub: deps.chatHub ?? null, refusals: deps.limits.widgetRefusals });
  await app.register(named(widgetAssetRoutes));
  await app.register(named(consoleAssetRoutes));
  await app.register(named(msgappWebhookRoutes), { services, ...(deps.msgappWebhook ?? { appSecret: null, verifyToken: null }) });
  await app.register(named(documentRoutes), { services });
  await app.register(named(consoleRoutes), { services, limits: deps.limits.console });
  await app.register(named(consoleInboxRoutes), { services, hub: deps.inboxHub ?? null });
  if (deps.temporalCodec) await app.register(named(temporalCodecRoutes), { prefix: CODEC_PREFIX, ...deps.temporalCodec });
  // Last, as a plugin (so it runs once every route above is registered, without closing
  // the boot sequence: callers may still add hooks before ready()): it answers, for every
  // path registered above, the methods that path lacks.
  await app.register(fp(async (root: FastifyInstance) => registerMethodNotAllowed(root)));
  return app;
}
