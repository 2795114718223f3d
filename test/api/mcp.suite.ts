import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startMcpHttp } from '../support/mcp';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { recordSecret } from '../support/secret-log';
import { startTestWorker, type TestWorker } from '../support/temporal';

/**
 * MCP servers end to end: a real MCP server (the SDK's own server classes, Streamable
 * HTTP, stateless) on 127.0.0.1 behind a bearer token; registered through the API (its
 * tools listed and stored); an agent enables it; a fake OpenAI-compatible model asks for
 * the tool during a widget turn; the call goes out, its result reaches the model and the
 * reply, and the conversation's timeline records it.
 */
const ORIGIN = 'https://shop.example';
const TOKEN = 'mcp-secret-token-0123456789';
let db: TestDatabase;
let llm: FakeLlm;
let tw: TestWorker;
let t: TestApp;
let mcpHttp: Awaited<ReturnType<typeof startMcpHttp>>;
let mcpUrl: string;
const toolCalls: Array<Record<string, unknown>> = [];

function shopServer(): McpServer {
  const server = new McpServer({ name: 'shop', version: '1.0.0' });
  server.registerTool('order_status', { description: 'The delivery status of an order', inputSchema: { order_id: z.string() } }, async ({ order_id }) => {
    toolCalls.push({ order_id });
    return { content: [{ type: 'text', text: `Order ${order_id} shipped on Monday with DHL.` }] };
  });
  server.registerTool('cancel_order', { description: 'Cancel an order', inputSchema: { order_id: z.string() } }, async () => ({ content: [{ type: 'text', text: 'cancelled' }] }));
  return server;
}

beforeAll(async () => {
  db = await createTestDatabase();
  recordSecret('provider token', TOKEN);
  mcpHttp = await startMcpHttp(shopServer, TOKEN);
  mcpUrl = mcpHttp.url;
  llm = await startFakeLlm({
    reply: (body) => {
      const last = body.messages.at(-1);
      // The tool's result arrives fenced as untrusted data: its lines between the markers.
      if (last.role === 'tool') return { text: `Update: ${String(last.content).split('\n').slice(1, -1).join('\n')}` };
      const tool = (body.tools ?? []).find((x: { function: { name: string } }) => x.function.name.endsWith('order_status'));
      return tool ? { tool_calls: [{ name: tool.function.name, arguments: { order_id: 'A-17' } }] } : { text: 'no tools' };
    },
  });
  // The operator's allow list names loopback: plain http reaches it (as for a model server on the private network).
  const sender = { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 5_000 };
  const llmSettings = { baseUrl: llm.url, model: 'fake-model' };
  tw = await startTestWorker(db, { llm: llmSettings, sender });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { llm: llmSettings, sender }, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await tw?.close();
  await llm?.close();
  await mcpHttp.close();
  await db?.drop();
});

test('register → tools listed → an agent turn calls a tool → its result in the reply and on the timeline; bad input and another workspace refused', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['mcp_servers:read', 'mcp_servers:write', 'credentials:write', 'workflows:write', 'workflows:publish', 'conversations:read'])).key);
  const cred = await t.app.inject({ method: 'POST', url: '/api/v1/credentials', headers: auth, payload: { name: 'shop mcp', provider: 'mcp', bearer_token: TOKEN } });
  expect(cred.statusCode).toBe(201);

  // Bad input: a URL outside the rules, a credential that is not there.
  expect((await t.app.inject({ method: 'POST', url: '/api/v1/mcp-servers', headers: auth, payload: { name: 'x', url: 'https://10.1.2.3/mcp' } })).json().error).toBe('invalid_url');
  expect((await t.app.inject({ method: 'POST', url: '/api/v1/mcp-servers', headers: auth, payload: { name: 'x', url: 'ftp://shop.example/mcp' } })).json().error).toBe('invalid_url');
  expect((await t.app.inject({ method: 'POST', url: '/api/v1/mcp-servers', headers: auth, payload: { name: 'x', url: mcpUrl, auth: 'cred_000000000000000000000000' } })).json().error).toBe('credential_not_found');

  // Without the token: registered, but the check failed and says why.
  const denied = await t.app.inject({ method: 'POST', url: '/api/v1/mcp-servers', headers: auth, payload: { name: 'shop', url: mcpUrl } });
  expect(denied.statusCode).toBe(201);
  expect(denied.json()).toMatchObject({ status: 'error', tools: [], last_error: expect.any(String) });
  // With it (PATCH checks again): the tools are listed and stored.
  const patched = await t.app.inject({ method: 'PATCH', url: `/api/v1/mcp-servers/${denied.json().id}`, headers: auth, payload: { auth: cred.json().id } });
  expect(patched.json()).toMatchObject({ status: 'ok', last_error: null, credential_id: cred.json().id, checked_at: expect.any(String) });
  expect(patched.json().tools.map((x: { name: string }) => x.name).sort()).toEqual(['cancel_order', 'order_status']);
  expect(JSON.stringify(patched.json())).not.toContain(TOKEN);
  const serverId = patched.json().id as string;

  // An agent that may call order_status only.
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { actions: [{ type: 'mcp', server_id: serverId, tools: ['order_status'] }] });
  const site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  const widget = (url: string, payload: object) => t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
  const conv = (await widget('init', {})).json();
  const res = await widget('send', { conversation_id: conv.conversation_id, text: 'where is my order A-17?' });
  expect(res.json().text).toBe('Update: Order A-17 shipped on Monday with DHL.');
  expect(toolCalls).toEqual([{ order_id: 'A-17' }]);
  const offered = llm.requests[0].body.tools.map((x: { function: { name: string } }) => x.function.name);
  expect(offered.filter((n: string) => n.startsWith('mcp_'))).toEqual(['mcp_0_order_status']);
  const events = (await t.app.inject({ method: 'GET', url: `/api/v1/conversations/${conv.conversation_id}/events`, headers: auth })).json().events;
  expect(events.filter((e: { type: string }) => e.type === 'mcp.tool_call').map((e: { data: unknown }) => e.data)).toEqual([
    expect.objectContaining({ server_id: serverId, tool: 'order_status', arguments: { order_id: 'A-17' }, ok: true, output: 'Order A-17 shipped on Monday with DHL.', duration_ms: expect.any(Number) }),
  ]);

  // The reply's language-model tokens (both rounds) are metered once, priced in the usage report.
  const [tokens] = (await db.orm.em.fork().execute(`select quantity from usage_records where kind = 'llm_tokens' and reference = ?`, [`reply:${res.json().message_id}`])) as Array<{ quantity: number }>;
  expect(tokens.quantity).toBeGreaterThan(0);
  const usage = await t.services.credits.usage(ws, { limit: 10 });
  expect(usage.usage).toEqual([expect.objectContaining({ kind: 'llm_tokens', quantity: tokens.quantity, unit: 'token', unit_price: 0.000002, currency: 'USD' })]);

  // The same reply's turn, retried after a crash before its reply was stored, reuses the call it made
  // (a tool may not be safe to run twice): the model is asked again, the tool is not.
  const replyId = res.json().message_id as string;
  const visitorMessageId = (await t.services.transcript.get(replyId))!.reply_to!;
  await db.orm.em.fork().execute('delete from chat_messages where id = ?', [replyId]);
  const asked = llm.requests.length;
  const again = await t.services.turns.run({ conversationId: conv.conversation_id, workspaceId: ws, messageId: visitorMessageId, replyId });
  expect(again.text).toBe('Update: Order A-17 shipped on Monday with DHL.');
  expect(llm.requests.length).toBeGreaterThan(asked);
  expect(toolCalls).toHaveLength(1);

  // Scopes: reading needs mcp_servers:read, writing mcp_servers:write.
  const readOnly = bearer((await createKey(t.services, ws, ['mcp_servers:read'])).key);
  expect((await t.app.inject({ method: 'POST', url: '/api/v1/mcp-servers', headers: readOnly, payload: { name: 'y', url: mcpUrl } })).statusCode).toBe(403);

  // Disabled: not contacted, and a later change of its name leaves it disabled.
  const disabled = await t.app.inject({ method: 'PATCH', url: `/api/v1/mcp-servers/${serverId}`, headers: auth, payload: { enabled: false } });
  expect(disabled.json()).toMatchObject({ enabled: false, status: 'disabled' });
  const renamed = await t.app.inject({ method: 'PATCH', url: `/api/v1/mcp-servers/${serverId}`, headers: auth, payload: { name: 'shop (paused)' } });
  expect(renamed.json()).toMatchObject({ name: 'shop (paused)', enabled: false, status: 'disabled' });

  // Another workspace sees nothing of it.
  const wsB = await createWorkspace(db.orm);
  const authB = bearer((await createKey(t.services, wsB, ['mcp_servers:read', 'mcp_servers:write'])).key);
  expect((await t.app.inject({ method: 'GET', url: `/api/v1/mcp-servers/${serverId}`, headers: authB })).statusCode).toBe(404);
  expect((await t.app.inject({ method: 'GET', url: '/api/v1/mcp-servers', headers: authB })).json().mcp_servers).toEqual([]);
  expect((await t.app.inject({ method: 'GET', url: '/api/v1/mcp-servers', headers: auth })).json().mcp_servers).toHaveLength(1);
});
