import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import WebSocket from 'ws';
import { buildApp } from '../../api/app';
import { ChatHub } from '../../api/chat-hub';
import { KeyCache } from '../../core/auth/key-cache';
import type { Orm } from '../../core/db/orm';
import { createRequestLimits } from '../../core/ratelimit';
import { createServices, type ServiceOptions, type Services } from '../../core/services';
import type { Cleanup } from './child';
import { createKey } from './db';
import { listen } from './load';

/** The page origin the benchmark widgets run on (the site's allowed origin). */
export const WIDGET_ORIGIN = 'https://shop.example';

/** The production keep-alive ping interval (CHAT_PING_INTERVAL_MS's default). */
const PING_INTERVAL_MS = 30_000;

export interface WidgetApi {
  app: FastifyInstance;
  services: Services;
  hub: ChatHub;
  /** http://127.0.0.1:port */
  url: string;
  /** ws://127.0.0.1:port */
  wsUrl: string;
}

/**
 * One API process as api/server.ts builds it (its own key cache and ChatHub, each with a
 * LISTEN connection), listening on 127.0.0.1. The widget limits are lifted: a benchmark
 * of 429s is worthless, and one sequential client would hit the 30 sends a minute per
 * conversation.
 */
export async function startWidgetApi(opts: {
  name: string;
  orm: Orm;
  databaseUrl: string;
  options: ServiceOptions;
  temporal?: { client: Client; taskQueue: string };
  cleanup: Cleanup;
}): Promise<WidgetApi> {
  const quiet = pino({ level: 'silent' });
  const keyCache = new KeyCache(opts.databaseUrl, quiet);
  await keyCache.start();
  opts.cleanup.push([`${opts.name} key cache`, () => keyCache.stop()]);
  const services = createServices(opts.orm.em, { ...opts.options, keyCache });
  // The fan-out bench opens hundreds of sockets from one address to one conversation: no caps here.
  const hub = new ChatHub({ em: opts.orm.em, sites: services.sites, databaseUrl: opts.databaseUrl, log: quiet, pingIntervalMs: PING_INTERVAL_MS, maxSockets: { perConversation: 1e9, perAddress: 1e9 } });
  await hub.start();
  opts.cleanup.push([`${opts.name} chat hub`, () => hub.stop()]);
  const app = await buildApp({
    services,
    limits: await createRequestLimits({ kind: 'memory' }, 1e9, 1e9, undefined, { perSiteClient: 1e9, sendsPerConversation: 1e9 }),
    bodyLimitBytes: 1024 * 1024,
    temporal: opts.temporal ?? null,
    chatHub: hub,
  });
  opts.cleanup.push([opts.name, () => app.close()]);
  const url = await listen(app);
  return { app, services, hub, url, wsUrl: url.replace(/^http/, 'ws') };
}

/** A published agent with a web_chat trigger and a site for it, made through the API as an operator would. */
export async function createWidgetSite(api: WidgetApi, workspaceId: string, instructions: string): Promise<{ agentId: string; siteId: string }> {
  const key = await createKey(api.services, workspaceId, ['workflows:write', 'workflows:publish']);
  const authorization = `Bearer ${key.key}`;
  const created = await api.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: { authorization },
    payload: { name: 'Bench shop helper', instructions, triggers: { web_chat: { allowed_origins: [WIDGET_ORIGIN] } } },
  });
  if (created.statusCode !== 201) throw new Error(`POST /api/v1/agents answered ${created.statusCode}: ${created.body}`);
  const agentId = created.json().id as string;
  const published = await api.app.inject({ method: 'POST', url: `/api/v1/agents/${agentId}/publish`, headers: { authorization } });
  if (published.statusCode >= 300) throw new Error(`publish answered ${published.statusCode}: ${published.body}`);
  const site = await api.services.sites.create(workspaceId, agentId, [WIDGET_ORIGIN]);
  return { agentId, siteId: site.site_id };
}

/** A new anonymous conversation, as the widget's init makes it. */
export async function initConversation(api: WidgetApi, siteId: string): Promise<string> {
  const res = await api.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': siteId, origin: WIDGET_ORIGIN }, payload: {} });
  if (res.statusCode !== 200) throw new Error(`widget init answered ${res.statusCode}: ${res.body}`);
  return res.json().conversation_id as string;
}

/**
 * An open reply socket on a conversation; `onFrame` gets each frame with the
 * performance.now() of its arrival. Closed by `cleanup` before the API goes.
 */
export async function openReplySocket(
  api: WidgetApi,
  siteId: string,
  conversationId: string,
  onFrame: (frame: Record<string, unknown>, at: number) => void,
  cleanup: Cleanup,
): Promise<WebSocket> {
  const ws = new WebSocket(`${api.wsUrl}/api/chat/connect?site_id=${encodeURIComponent(siteId)}&conversation_id=${encodeURIComponent(conversationId)}`, { origin: WIDGET_ORIGIN });
  ws.on('message', (data) => {
    const at = performance.now();
    onFrame(JSON.parse(String(data)) as Record<string, unknown>, at);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`the socket handshake for ${conversationId} answered ${res.statusCode}`)));
  });
  cleanup.push([
    `socket ${conversationId}`,
    async () => {
      if (ws.readyState === ws.CLOSED) return;
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.terminate();
      });
    },
  ]);
  return ws;
}
