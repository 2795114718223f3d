import WebSocket from 'ws';
import type { Cleanup } from './child';
import type { Scope } from '../../domain/keys/scopes';
import { createKey, type BenchApi } from './setup';

/** The page origin the benchmark widgets run on (the site's allowed origin). */
export const WIDGET_ORIGIN = 'https://shop.example';

/** An agent created and published through the API with a new key, as an operator would; and the key. */
export async function publishAgent(api: BenchApi, workspaceId: string, payload: Record<string, unknown>, scopes: Scope[] = []): Promise<{ agentId: string; key: string }> {
  const { key } = await createKey(api.c.services, workspaceId, ['workflows:write', 'workflows:publish', ...scopes]);
  const authorization = `Bearer ${key}`;
  const created = await api.app.inject({ method: 'POST', url: '/api/v1/agents', headers: { authorization }, payload });
  if (created.statusCode !== 201) throw new Error(`POST /api/v1/agents answered ${created.statusCode}: ${created.body}`);
  const agentId = created.json().id as string;
  const published = await api.app.inject({ method: 'POST', url: `/api/v1/agents/${agentId}/publish`, headers: { authorization } });
  if (published.statusCode >= 300) throw new Error(`publish answered ${published.statusCode}: ${published.body}`);
  return { agentId, key };
}

/** A published agent with a web_chat trigger (`webChat`: more of its settings) and a site for it. */
export async function createWidgetSite(api: BenchApi, workspaceId: string, instructions: string, name = 'Bench shop helper', webChat: Record<string, unknown> = {}): Promise<{ agentId: string; siteId: string }> {
  const { agentId } = await publishAgent(api, workspaceId, { name, instructions, triggers: { web_chat: { allowed_origins: [WIDGET_ORIGIN], ...webChat } } });
  const site = await api.c.services.sites.create(workspaceId, agentId, [WIDGET_ORIGIN]);
  return { agentId, siteId: site.site_id };
}

/** A new anonymous conversation, as the widget's init makes it. */
export async function initConversation(api: BenchApi, siteId: string): Promise<string> {
  const res = await api.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': siteId, origin: WIDGET_ORIGIN }, payload: {} });
  if (res.statusCode !== 200) throw new Error(`widget init answered ${res.statusCode}: ${res.body}`);
  return res.json().conversation_id as string;
}

/** An open reply socket on a conversation; `onFrame` gets each frame with the performance.now() of its arrival. */
export async function openReplySocket(api: BenchApi, siteId: string, conversationId: string, onFrame: (frame: Record<string, unknown>, at: number) => void, cleanup: Cleanup): Promise<WebSocket> {
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
  cleanup.push([`socket ${conversationId}`, async () => void (ws.readyState === ws.CLOSED || (await new Promise((resolve) => ws.once('close', resolve).terminate())))]);
  return ws;
}
