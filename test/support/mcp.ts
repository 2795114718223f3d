import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * A stateless Streamable HTTP MCP server (the SDK's own classes) on 127.0.0.1: each request gets a server of its own
 * from `make`, closed with the response. With `token`, a request without `Authorization: Bearer <token>` is 401.
 */
export async function startMcpHttp(make: () => McpServer, token?: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (token && req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const mcp = make();
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
