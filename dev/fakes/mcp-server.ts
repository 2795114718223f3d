import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** A real MCP server (the SDK's McpServer over stateless Streamable HTTP) on 127.0.0.1 with one tool, `order_status`, answering `status(order_id)`. */
export async function startOrderStatusServer(status: (orderId: string) => Promise<string>): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const mcp = new McpServer({ name: 'orders', version: '1.0.0' });
    mcp.registerTool('order_status', { description: 'The delivery status of an order', inputSchema: { order_id: z.string() } }, async ({ order_id }) => ({
      content: [{ type: 'text', text: await status(order_id) }],
    }));
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, close: () => new Promise<void>((r) => server.close(() => r())) };
}
