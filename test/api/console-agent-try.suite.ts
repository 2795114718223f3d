import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startMcpHttp } from '../support/mcp';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, signedInUser } from '../support/console';
import { startTestWorker, type TestWorker } from '../support/temporal';

/**
 * POST /api/console/agents/{id}/try: a real turn (the conversation actor, the fake model on loopback) in a test
 * conversation that no conversation list, analytics or billing counts; an MCP tool its server marks read-only runs,
 * one that acts outside is recorded and never reaches the server, and a messaging number's send is recorded, not made.
 * Scoped to the session's workspace; owners and admins only.
 */

let db: TestDatabase;
let t: TestApp;
let tw: TestWorker;
let llm: FakeLlm;
let mcpHttp: Awaited<ReturnType<typeof startMcpHttp>>;
let mcpUrl: string;
/** What the MCP server was actually asked to run. */
const ran: string[] = [];

function shopServer(): McpServer {
  const server = new McpServer({ name: 'shop', version: '1.0.0' });
  server.registerTool('order_status', { description: 'The delivery status of an order', inputSchema: { order_id: z.string() }, annotations: { readOnlyHint: true } }, async ({ order_id }) => {
    ran.push(`order_status ${order_id}`);
    return { content: [{ type: 'text', text: `Order ${order_id} shipped on Monday.` }] };
  });
  server.registerTool('cancel_order', { description: 'Cancel an order', inputSchema: { order_id: z.string() } }, async ({ order_id }) => {
    ran.push(`cancel_order ${order_id}`);
    return { content: [{ type: 'text', text: 'cancelled' }] };
  });
  return server;
}

beforeAll(async () => {
  db = await createTestDatabase();
  mcpHttp = await startMcpHttp(shopServer);
  mcpUrl = mcpHttp.url;
  llm = await startFakeLlm({
    reply: (body) => {
      const last = body.messages.at(-1);
      const asked = String([...body.messages].reverse().find((m: { role: string }) => m.role === 'user')?.content ?? '');
      if (asked.includes('a person')) return last.role === 'tool' ? { text: 'A colleague will take it from here.' } : { tool_calls: [{ name: 'handoff', arguments: { reason: 'asked for a person' } }] };
      if (last.role === 'tool') return { text: 'Your order 42 shipped, and I cancelled the duplicate.' };
      const name = (tool: string) => (body.tools ?? []).find((x: { function: { name: string } }) => x.function.name.endsWith(tool))?.function.name;
      if (String(last.content).includes('order 42')) {
        return { tool_calls: [{ name: name('order_status'), arguments: { order_id: '42' } }, { name: name('cancel_order'), arguments: { order_id: '43' } }] };
      }
      return { text: `Echo: ${last.content}` };
    },
  });
  const sender = { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 5_000 };
  const llmSettings = { baseUrl: llm.url, model: 'fake-model' };
  tw = await startTestWorker(db, { llm: llmSettings, sender });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN }, serviceOptions: { llm: llmSettings, sender, publicBaseUrl: CONSOLE_ORIGIN }, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await llm?.close();
  await mcpHttp?.close();
  await db?.drop();
});

test('a try runs a real turn in a test conversation: read-only tools run, tools that act outside, the send and a handoff are recorded not made, and nothing lists, counts or bills it', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['mcp_servers:write', 'workflows:write', 'conversations:read', 'analytics:read'])).key);
  const server = await t.app.inject({ method: 'POST', url: '/api/v1/mcp-servers', headers: auth, payload: { name: 'shop', url: mcpUrl } });
  expect(server.json()).toMatchObject({ status: 'ok' });
  const agent = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Orders', instructions: 'Help with orders.', triggers: { msgapp: { number: '+15551234567', phone_number_id: '1098' } }, actions: [{ type: 'sender' }, { type: 'handoff' }, { type: 'mcp', server_id: server.json().id }] },
  });
  const agentId = agent.json().id as string;
  const owner = await signedInUser(t.app, t.services, ws, 'owner');
  const tryIt = (body: object, who = owner, id = agentId) => t.app.inject({ method: 'POST', url: `/api/console/agents/${id}/try`, headers: asBrowser(who), payload: body });

  const first = await tryIt({ text: 'Where is order 42?' });
  expect(first.statusCode).toBe(200);
  const turn = first.json();
  expect(turn.reply).toMatchObject({ text: 'Your order 42 shipped, and I cancelled the duplicate.', held: false });
  expect(turn.actions).toEqual([
    expect.objectContaining({ kind: 'mcp_tool', name: 'order_status', arguments: { order_id: '42' }, stubbed: false, ok: true, output: 'Order 42 shipped on Monday.' }),
    expect.objectContaining({ kind: 'mcp_tool', name: 'cancel_order', arguments: { order_id: '43' }, stubbed: true }),
    expect.objectContaining({ kind: 'sender', name: 'send_reply', stubbed: true, arguments: { channel: 'msgapp', from: '+15551234567', text: turn.reply.text } }),
  ]);
  // The server ran the read-only tool only.
  expect(ran).toEqual(['order_status 42']);

  // The same test conversation continues; the model sees its history.
  const second = await tryIt({ text: 'thanks', conversation_id: turn.conversation_id });
  expect(second.json()).toMatchObject({ conversation_id: turn.conversation_id, reply: { text: 'Echo: thanks' } });

  // A handoff asks no person: recorded for the panel, the conversation not flagged, the next message answered.
  const handoff = (await tryIt({ text: 'a person please', conversation_id: turn.conversation_id })).json();
  expect(handoff.reply).toMatchObject({ text: 'A colleague will take it from here.', handoff: true });
  expect(handoff.actions).toEqual([expect.objectContaining({ kind: 'handoff', stubbed: true, arguments: { reason: 'asked for a person' } }), expect.objectContaining({ kind: 'sender' })]);
  const [flag] = (await db.orm.em.fork().execute(`select needs_human from conversations where id = ?`, [turn.conversation_id])) as Array<{ needs_human: boolean }>;
  expect(flag.needs_human).toBe(false);
  expect((await tryIt({ text: 'still there?', conversation_id: turn.conversation_id })).json().reply).toMatchObject({ text: 'Echo: still there?', held: false });

  // In no list, no analytics, no billing.
  const listed = await t.app.inject({ method: 'GET', url: '/api/v1/conversations', headers: auth });
  expect(listed.json().conversations).toEqual([]);
  const summary = (await t.app.inject({ method: 'GET', url: '/api/v1/analytics/summary', headers: auth })).json();
  expect(summary).toMatchObject({ conversations: 0, messages_in: 0, messages_out: 0 });
  const channels = (await t.app.inject({ method: 'GET', url: '/api/v1/analytics/channel-breakdown', headers: auth })).json();
  expect(channels.channels.every((c: { conversations: number; messages: number }) => c.conversations === 0 && c.messages === 0)).toBe(true);
  const usage = (await t.app.inject({ method: 'GET', url: '/api/v1/billing/usage', headers: auth })).json();
  expect(usage.usage).toEqual([]);
  // Not a whole hour's rollup either (the summary's partial hours read the messages themselves).
  const [hours] = (await db.orm.em.fork().execute(`select count(*)::int as n from analytics_message_hours where workspace_id = ?`, [ws])) as Array<{ n: number }>;
  expect(hours.n).toBe(0);
});

test('scoped to the session: another workspace\'s agent and test conversation are 404, a viewer is 403, an API key 401', async () => {
  const wsA = await createWorkspace(db.orm);
  const wsB = await createWorkspace(db.orm);
  const make = async (ws: string) => {
    const auth = bearer((await createKey(t.services, ws, ['workflows:write'])).key);
    return (await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Helper', instructions: 'Help.' } })).json().id as string;
  };
  const [agentA, agentB] = [await make(wsA), await make(wsB)];
  const ownerA = await signedInUser(t.app, t.services, wsA, 'owner');
  const ownerB = await signedInUser(t.app, t.services, wsB, 'owner');
  const viewerA = await signedInUser(t.app, t.services, wsA, 'viewer');
  const tryIt = (who: typeof ownerA, id: string, body: object) => t.app.inject({ method: 'POST', url: `/api/console/agents/${id}/try`, headers: asBrowser(who), payload: body });

  const a = await tryIt(ownerA, agentA, { text: 'hello' });
  expect(a.json().reply.text).toBe('Echo: hello');
  const other = await tryIt(ownerB, agentA, { text: 'hello' });
  expect([other.statusCode, other.json().error]).toEqual([404, 'not_found']);
  // B's own agent with A's test conversation: 404, nothing written to it.
  const stolen = await tryIt(ownerB, agentB, { text: 'hello', conversation_id: a.json().conversation_id });
  expect([stolen.statusCode, stolen.json().error]).toEqual([404, 'not_found']);
  const viewer = await tryIt(viewerA, agentA, { text: 'hello' });
  expect([viewer.statusCode, viewer.json().error]).toEqual([403, 'forbidden']);
  const key = bearer((await createKey(t.services, wsA, ['workflows:write'])).key);
  const byKey = await t.app.inject({ method: 'POST', url: `/api/console/agents/${agentA}/try`, headers: key, payload: { text: 'hello' } });
  expect([byKey.statusCode, byKey.json().error]).toEqual([401, 'not_signed_in']);
  const blank = await tryIt(ownerA, agentA, { text: '   ' });
  expect([blank.statusCode, blank.json().error]).toEqual([400, 'invalid_request']);
});
