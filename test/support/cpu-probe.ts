import fs from 'node:fs';

/**
 * Where a run's CPU goes, per test file (JEST_CPU_PROBE=<file.jsonl>, jest.config.js loads this only then): each
 * file's start and end in its worker, with the worker's CPU so far (its own plus the children it has reaped: a
 * browser, SIPp, Schemathesis, a transcriber). `node --import tsx scripts/cpu-probe-report.ts <file.jsonl>` sums
 * it; the Temporal server and PostgreSQL are outside (their own processes, read by the report before and after).
 */
const out = process.env.JEST_CPU_PROBE;

function cpuSeconds(): number {
  // utime stime cutime cstime: fields 14-17 of /proc/self/stat, in clock ticks (100 Hz on Linux).
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / 100;
}

function record(kind: 'start' | 'end'): void {
  if (!out) return;
  const file = expect.getState().testPath ?? 'unknown';
  fs.appendFileSync(out, JSON.stringify({ kind, pid: process.pid, file, t: Date.now(), cpu: cpuSeconds() }) + '\n');
}

record('start');
afterAll(() => record('end'));
