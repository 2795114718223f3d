import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { SLOW_CLOSE_MS, type Composition } from '../app/compose';
import { createRequestLimits, openRateStore, WINDOW_SECONDS, type RateStore } from '../lib/ratelimit';
import { buildApp, loggerOptions } from './app';
import { VoiceSignalling } from './voice-signal';
import { ChatHub } from './chat-hub';
import { InboxHub } from './inbox-hub';

export interface ApiServer {
  app: FastifyInstance;
  chatHub: ChatHub;
  inboxHub?: InboxHub;
}

export interface ApiOptions {
  /** Where rate-limit windows live: a kind opened here from the config, or a store the caller owns (tests). */
  rateStore: 'memory' | 'redis' | 'postgres' | RateStore;
  /** Rate-limit window (tests compress it). */
  windowSeconds?: number;
  /** Fastify's logger; default: the production options at LOG_LEVEL. */
  logger?: FastifyServerOptions['logger'];
}

/**
 * The API's own parts on top of a composition (app/compose.ts): rate limits, this
 * process's reply sockets (subscribed on the composition's LISTEN connection) and the
 * Fastify app. They stop with the composition's `close()`: sockets first (1001 going
 * away), then the HTTP server, then the rate store.
 */
export async function startApi(c: Composition, opts: ApiOptions): Promise<ApiServer> {
  const { config } = c;
  if (!c.notifications) throw new Error('the API needs a composition with notifications (role api or both)');
  const rate =
    typeof opts.rateStore === 'string'
      ? await openRateStore(opts.rateStore, { redisUrl: config.REDIS_URL, databaseUrl: c.databaseUrl })
      : { store: opts.rateStore, close: async () => undefined };
  c.onClose(() => rate.close(), 'rate-limit store');
  const limits = await createRequestLimits(rate.store, config.RATE_LIMIT_PER_KEY, config.RATE_LIMIT_PER_WORKSPACE, opts.windowSeconds ?? WINDOW_SECONDS, {
    perSiteClient: config.WIDGET_RATE_LIMIT_PER_CLIENT,
    sendsPerConversation: config.WIDGET_SENDS_PER_CONVERSATION,
    refusalsPerAddress: config.WIDGET_REFUSALS_PER_ADDRESS,
    work: {
      inFlightPerAddress: config.WIDGET_FILES_IN_FLIGHT_PER_ADDRESS,
      inFlightPerSite: config.WIDGET_FILES_IN_FLIGHT_PER_SITE,
      perAddressPerHour: config.WIDGET_FILES_PER_ADDRESS_PER_HOUR,
      bytesPerAddressPerHour: config.WIDGET_FILE_BYTES_PER_ADDRESS_PER_HOUR,
      bytesPerSitePerDay: config.WIDGET_FILE_BYTES_PER_SITE_PER_DAY,
    },
  }, {
    perVisitor: config.DIAL_OUT_CALLS_PER_VISITOR,
    perAddress: config.DIAL_OUT_CALLS_PER_ADDRESS,
    perDestination: config.DIAL_OUT_CALLS_PER_DESTINATION,
    windowSeconds: config.DIAL_OUT_WINDOW_SECONDS,
  }, {
    attemptsPerAddress: config.CONSOLE_SIGNIN_ATTEMPTS_PER_ADDRESS,
    failuresPerAccount: config.CONSOLE_SIGNIN_FAILURES_PER_ACCOUNT,
    windowSeconds: config.CONSOLE_SIGNIN_WINDOW_SECONDS,
  });
  const chatHub = new ChatHub({
    em: c.em,
    sites: c.services.sites,
    notifications: c.notifications,
    log: c.log,
    pingIntervalMs: config.CHAT_PING_INTERVAL_MS,
    maxSockets: { perConversation: config.CHAT_MAX_SOCKETS_PER_CONVERSATION, perAddress: config.CHAT_MAX_SOCKETS_PER_ADDRESS },
  });
  const inboxHub = new InboxHub({
    notifications: c.notifications,
    sessions: c.services.sessions,
    inbox: c.services.inbox,
    log: c.log,
    heartbeatMs: config.INBOX_HEARTBEAT_MS,
    graceMs: config.INBOX_OFFLINE_GRACE_MS,
  });
  const voiceSignalling = c.voice.transport.kind === 'direct'
    ? new VoiceSignalling({ sessions: c.services.voice, box: c.box, notifications: c.notifications, log: c.log, iceServers: (config.VOICE_ICE_SERVERS ?? '').split(',').map((u) => ({ urls: u.trim() })).filter((s) => s.urls), maxSocketsPerAddress: config.VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS })
    : null;
  const app = await buildApp({
    services: c.services,
    voiceSignalling,
    msgappWebhook: { appSecret: config.MSGAPP_APP_SECRET ?? null, verifyToken: config.MSGAPP_VERIFY_TOKEN ?? null },
    limits,
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    maxUploadBytes: config.KB_UPLOAD_MAX_BYTES,
    logger: opts.logger ?? loggerOptions(config.LOG_LEVEL),
    chatHub,
    inboxHub,
    temporalCodec: { codec: c.payloadCodec, token: config.TEMPORAL_CODEC_TOKEN ?? null, uiOrigins: config.TEMPORAL_UI_ORIGIN },
    metricsToken: config.METRICS_TOKEN ?? null,
  });
  let connections = 0;
  app.server.on('connection', (socket: Socket) => {
    connections++;
    socket.once('close', () => connections--);
  });
  c.onClose(async () => {
    // A close that drags says which requests it is waiting for.
    const slow = setTimeout(() => c.log.warn({ requests: app.inFlightRequests(), connections }, 'shutdown: HTTP server waits for requests in flight'), SLOW_CLOSE_MS);
    try {
      await app.close();
    } finally {
      clearTimeout(slow);
    }
  }, 'HTTP server');
  await chatHub.start();
  c.onClose(() => chatHub.stop(), 'chat sockets');
  await inboxHub.start();
  c.onClose(() => inboxHub.stop(), 'inbox streams');
  if (voiceSignalling) {
    await voiceSignalling.start();
    c.onClose(() => voiceSignalling.stop(), 'voice signalling sockets');
  }
  return { app, chatHub, inboxHub };
}
