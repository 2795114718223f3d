import type { FastifyInstance } from 'fastify';
import { Client, Connection } from '@temporalio/client';
import { KeyCache } from '../core/auth/key-cache';
import { DenseIndex } from '../core/kb/dense-index';
import type { Config } from '../core/config';
import { openSecretBox } from '../core/crypto/encryption-key';
import { openDatabase, type Orm } from '../core/db/orm';
import { createRequestLimits, openRateStore } from '../core/ratelimit';
import { createServices, serviceOptionsFromConfig } from '../core/services';
import { buildApp, loggerOptions } from './app';
import { ChatHub } from './chat-hub';
import pino from 'pino';

export interface ApiServer {
  app: FastifyInstance;
  orm: Orm;
  close(): Promise<void>;
}

/** Everything one API process needs, wired from config: database, key cache, limits, app. */
export async function createApiServer(
  config: Config,
  opts: { databaseUrl: string; rateStore: 'memory' | 'redis' | 'postgres'; embedded: boolean; temporalAddress?: string; logger?: boolean },
): Promise<ApiServer> {
  const log = pino({ level: config.LOG_LEVEL });
  const orm = await openDatabase(opts.databaseUrl);
  // The key first: without it (or with one that does not open the stored secrets) nothing else starts.
  const box = await openSecretBox(config, orm.em, { embedded: opts.embedded });
  const keyCache = new KeyCache(opts.databaseUrl, log);
  await keyCache.start();
  const rate = await openRateStore(opts.rateStore, { redisUrl: config.REDIS_URL, databaseUrl: opts.databaseUrl });
  const limits = await createRequestLimits(rate.store, config.RATE_LIMIT_PER_KEY, config.RATE_LIMIT_PER_WORKSPACE, undefined, {
    perSiteClient: config.WIDGET_RATE_LIMIT_PER_CLIENT,
    sendsPerConversation: config.WIDGET_SENDS_PER_CONVERSATION,
    refusalsPerAddress: config.WIDGET_REFUSALS_PER_ADDRESS,
  });
  const denseIndex = new DenseIndex(orm.em, opts.databaseUrl, log);
  await denseIndex.start();
  const services = createServices(orm.em, serviceOptionsFromConfig(config, { box, keyCache, denseIndex }));
  const chatHub = new ChatHub({
    em: orm.em,
    sites: services.sites,
    databaseUrl: opts.databaseUrl,
    log,
    pingIntervalMs: config.CHAT_PING_INTERVAL_MS,
    maxSockets: { perConversation: config.CHAT_MAX_SOCKETS_PER_CONVERSATION, perAddress: config.CHAT_MAX_SOCKETS_PER_ADDRESS },
  });
  await chatHub.start();
  // Endpoints that start a workflow and wait for it (message sends) need the workflow service.
  const temporalConnection = opts.temporalAddress ? await Connection.connect({ address: opts.temporalAddress }) : null;
  const temporal = temporalConnection
    ? { client: new Client({ connection: temporalConnection, namespace: config.TEMPORAL_NAMESPACE }), taskQueue: config.TEMPORAL_TASK_QUEUE }
    : null;
  const app = await buildApp({
    temporal,
    msgappWebhook: { appSecret: config.MSGAPP_APP_SECRET ?? null, verifyToken: config.MSGAPP_VERIFY_TOKEN ?? null },
    services,
    limits,
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    maxUploadBytes: config.KB_UPLOAD_MAX_BYTES,
    logger: opts.logger === false ? false : loggerOptions(config.LOG_LEVEL),
    chatHub,
  });
  return {
    app,
    orm,
    close: async () => {
      // Sockets first (1001 going away), then the HTTP server.
      await chatHub.stop();
      await app.close();
      await keyCache.stop();
      await denseIndex.stop();
      await temporalConnection?.close();
      await rate.close();
      await orm.close();
    },
  };
}
