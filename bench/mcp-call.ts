// The mcp-call section: what a turn's MCP tool call costs above the tool's own latency.
// A real MCP server (the SDK's McpServer over stateless Streamable HTTP) on 127.0.0.1 whose
// tool waits BENCH_MCP_TOOL_MS (10) then answers. Targets, sequential samples alternating:
// the tool's own function (baseline), a kept-open SDK client's callTool (the protocol alone),
// and McpService.call as a turn makes it (address check, pinned connection, initialize,
// call, close). Overhead = McpService.call p50 − the tool's own p50.
//
// BENCH_MCP_SAMPLES (200), BENCH_MCP_TOOL_MS (10).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as SdkServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { SecretBox } from '../lib/crypto/secret-box';
import { McpService } from '../domain/mcp/servers';
import { policyFromCidrs } from '../lib/net/ssrf';
import { section, type Cleanup } from './lib/child';
import { envNumber } from './lib/load';
import { setUpBench } from './lib/setup';
import { now, percentile, runStats, summarizeTarget } from './lib/stats';
import type { Result, RunStats } from './lib/types';

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const samples = Math.round(envNumber('BENCH_MCP_SAMPLES', 200, 10));
  const toolMs = envNumber('BENCH_MCP_TOOL_MS', 10, 0);
  const bench = await setUpBench(cleanup);
  const tool = async (id: string) => {
    await sleep(toolMs);
    return `Order ${id} shipped.`;
  };
  const server = http.createServer((req, res) => {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const mcp = new SdkServer({ name: 'bench', version: '1.0.0' });
    mcp.registerTool('order_status', { description: 'status', inputSchema: { order_id: z.string() } }, async ({ order_id }) => ({ content: [{ type: 'text', text: await tool(order_id) }] }));
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(['mcp server', () => new Promise<void>((r) => server.close(() => r()))]);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;

  const service = new McpService(bench.db.orm.em, SecretBox.fromString('0'.repeat(64)), { policy: policyFromCidrs('127.0.0.0/8') });
  const registered = await service.create(bench.workspaceId, { name: 'bench', url, enabled: true }, { mayUseCredentials: false });
  if (registered.status !== 'ok') throw new Error(`the bench MCP server did not check out: ${registered.last_error}`);
  const kept = new Client({ name: 'bench', version: '1.0.0' });
  await kept.connect(new StreamableHTTPClientTransport(new URL(url)));
  cleanup.push(['kept client', () => kept.close()]);

  const targets: Array<[string, () => Promise<unknown>]> = [
    ["the tool's own function (baseline)", () => tool('A-1')],
    ['SDK client kept open: callTool', () => kept.callTool({ name: 'order_status', arguments: { order_id: 'A-1' } })],
    ['McpService.call (as a turn: check, connect, call, close)', async () => {
      const r = await service.call(bench.workspaceId, registered.id, 'order_status', { order_id: 'A-1' });
      if (!r.ok) throw new Error(r.output);
    }],
  ];
  for (const [, run] of targets) for (let i = 0; i < 10; i++) await run(); // warm
  const lat = new Map<string, number[]>(targets.map(([n]) => [n, []]));
  const started = now();
  for (let i = 0; i < samples; i++) {
    for (const [name, run] of targets) {
      const t0 = now();
      await run();
      lat.get(name)!.push(now() - t0);
    }
  }
  const seconds = (now() - started) / 1000;
  const runs: RunStats[] = targets.map(([name]) => runStats(name, 1, seconds / targets.length, samples, lat.get(name)!, 1, { ok: samples }));
  const p50 = (name: string) => percentile(lat.get(name)!, 50);
  const p99 = (name: string) => percentile(lat.get(name)!, 99);
  const [base, keptName, turnName] = targets.map(([n]) => n);
  for (const [name] of targets) log(`  ${name}: p50 ${p50(name).toFixed(1)} ms, p99 ${p99(name).toFixed(1)} ms`);
  const headline = `mcp-call: a turn's tool call adds p50 ${(p50(turnName) - p50(base)).toFixed(1)} ms, p99 ${(p99(turnName) - p50(base)).toFixed(1)} ms over the tool's own ${toolMs} ms (a kept-open client: p50 ${(p50(keptName) - p50(base)).toFixed(1)} ms)`;
  return {
    section: 'mcp-call',
    description: `A real MCP server (SDK, stateless Streamable HTTP) on loopback whose tool takes ${toolMs} ms; ${samples} sequential samples per target, alternating`,
    settings: { samples, toolMs },
    runs,
    targets: targets.map(([n]) => summarizeTarget(runs, n)),
    headlines: [headline],
  };
}

export const benchMcpCall = section(module, 'mcp-call', measure);
