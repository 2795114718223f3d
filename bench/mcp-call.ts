// What this measures and how to read it: docs/benchmarks.md#mcp-call
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SecretBox } from '../lib/crypto/secret-box';
import { McpService } from '../domain/mcp/servers';
import { policyFromCidrs } from '../lib/net/ssrf';
import { startOrderStatusServer } from '../dev/fakes/mcp-server';
import { section, type Cleanup } from './lib/child';
import { envInt, envNumber } from './lib/load';
import { setUpBench } from './lib/setup';
import { now, percentile, runStats, summarizeTarget } from './lib/stats';
import type { Result, RunStats } from './lib/types';

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const samples = envInt('BENCH_MCP_SAMPLES', 200, 10);
  const toolMs = envNumber('BENCH_MCP_TOOL_MS', 10, 0);
  const bench = await setUpBench(cleanup);
  const tool = (id: string) => sleep(toolMs).then(() => `Order ${id} shipped.`);
  const { url, close } = await startOrderStatusServer(tool);
  cleanup.push(['mcp server', close]);

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
