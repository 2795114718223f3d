// `npm run bench`: each section in a child process, a summary, bench/results/latest.json. Settings, and how to read
// the output: docs/benchmarks.md.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { benchAnalytics } from './analytics';
import { benchMcpCall } from './mcp-call';
import { benchAuthOverhead } from './auth-overhead';
import { benchWebhookFanout, benchWebhookRetryPath } from './webhook-fanout';
import { benchKbIndexing } from './kb-indexing';
import { benchKbSearch } from './kb-search';
import { benchKbUploadRss } from './kb-upload-rss';
import { benchMsgappAgentReply } from './msgapp-agent-reply';
import { benchMsgappInbound } from './msgapp-inbound';
import { benchMsgappSend } from './msgapp-send';
import { benchTranscribe } from './transcribe';
import { benchVoice } from './voice';
import { benchWidgetReply } from './widget-reply';
import { benchWidgetSockets } from './widget-sockets';
import { benchStructuredExtraction } from './structured-extraction';
import type { Result } from './lib/types';

const SECTIONS: Array<{ name: string; run: (log: (line: string) => void) => Promise<Result> }> = [
  { name: 'auth-overhead', run: benchAuthOverhead },
  { name: 'webhook-fanout', run: benchWebhookFanout },
  { name: 'webhook-retry-path', run: benchWebhookRetryPath },
  { name: 'kb-indexing', run: benchKbIndexing },
  { name: 'kb-search', run: benchKbSearch },
  { name: 'kb-upload-rss', run: benchKbUploadRss },
  { name: 'msgapp-send', run: benchMsgappSend },
  { name: 'msgapp-agent-reply', run: benchMsgappAgentReply },
  { name: 'msgapp-inbound', run: benchMsgappInbound },
  { name: 'widget-reply', run: benchWidgetReply },
  { name: 'widget-sockets', run: benchWidgetSockets },
  { name: 'analytics', run: benchAnalytics },
  { name: 'mcp-call', run: benchMcpCall },
  { name: 'transcribe', run: benchTranscribe },
  { name: 'voice', run: benchVoice },
  { name: 'structured-extraction', run: benchStructuredExtraction },
];

const fmt = (n: number, digits = 0) => n.toFixed(digits);
/** A section's Result with its runs, targets and comparisons filled in (empty when it left them out). */
type Ran = Result & Required<Pick<Result, 'runs' | 'targets' | 'comparisons'>>;

function printSummary(results: Ran[]): void {
  console.log('\nSummary (mean over measured rounds; kb-search rows: sequential searches, req/s = 1000 / mean latency)');
  const header = ['section', 'target', 'rounds', 'req/s mean', 'req/s best', 'p50 ms', 'p99 ms'];
  const rows = results.flatMap((r) =>
    r.targets.map((t) => [r.section, t.target, String(t.rounds), fmt(t.meanRequestsPerSec), fmt(t.bestRequestsPerSec), fmt(t.meanLatencyP50Ms, 1), fmt(t.meanLatencyP99Ms, 1)]),
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  if (rows.length) console.log(`${[header, widths.map((w) => '-'.repeat(w)), ...rows].map(line).join('\n')}\n`);
  for (const r of results) {
    for (const h of r.headlines ?? []) console.log(h);
    for (const c of r.checks ?? []) console.log(`${c.name}: ${fmt(c.value, 1)} ${c.unit} (goal ${c.goal} ${c.unit}) ${c.pass ? 'ok' : 'MISSED'}`);
    for (const c of r.comparisons) {
      console.log(
        `${c.name}: ${c.subject} ${fmt(c.subjectRequestsPerSec)} ${c.subjectUnit ?? 'req/s'} / ${c.baseline} ${fmt(c.baselineRequestsPerSec)} ${c.baselineUnit ?? 'req/s'} ` +
          `= ratio ${fmt(c.ratio, 2)} (target >= ${c.target}) ${c.pass ? 'ok' : 'BELOW TARGET'}` +
          `  [per round: ${c.roundRatios.map((x) => fmt(x, 2)).join(', ')}; best/best: ${fmt(c.bestRatio, 2)}]`,
      );
    }
  }
}

async function main(): Promise<void> {
  const only = process.env.BENCH_ONLY;
  const sections = only ? SECTIONS.filter((s) => s.name === only) : SECTIONS;
  if (sections.length === 0) throw new Error(`BENCH_ONLY=${only}: no such section (have: ${SECTIONS.map((s) => s.name).join(', ')})`);

  const results: Ran[] = [];
  for (const s of sections) {
    console.log(`[bench] ${s.name}`);
    const started = Date.now();
    const r = await s.run((line) => console.log(line));
    results.push({ ...r, runs: r.runs ?? [], targets: r.targets ?? [], comparisons: r.comparisons ?? [], finishedAt: new Date().toISOString() });
    console.log(`[bench] ${s.name} done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }

  printSummary(results);

  const dir = path.join(__dirname, 'results');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'latest.json');
  const machine = { node: process.version, platform: `${os.platform()} ${os.release()}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model };
  // BENCH_ONLY replaces that section's entry and keeps the other sections' last results (each result has its own finishedAt).
  const previous = only ? await readFile(file, 'utf8').then((t) => (JSON.parse(t) as { results?: Ran[] }).results ?? [], () => []) : [];
  const kept = previous.filter((r) => !results.some((x) => x.section === r.section));
  const order = (r: Ran) => SECTIONS.findIndex((s) => s.name === r.section);
  const all = [...kept, ...results].sort((a, b) => order(a) - order(b));
  await writeFile(file, JSON.stringify({ finishedAt: new Date().toISOString(), machine, results: all }, null, 2) + '\n');
  console.log(`\n[bench] results written to ${path.relative(process.cwd(), file)}${kept.length ? ` (kept the earlier results of ${kept.map((r) => r.section).join(', ')})` : ''}`);

  if (process.env.BENCH_STRICT === '1' && results.some((r) => r.comparisons.some((c) => !c.pass) || (r.checks ?? []).some((c) => !c.pass))) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
});
