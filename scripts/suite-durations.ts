/**
 * Rewrites test/support/suite-durations.json (the test order of a fresh clone, test/support/sequencer.js)
 * from a `jest --json` report: `npm run test:durations` runs Jest once and keeps each suite of 3 s or more,
 * longest first. `npm run test:durations -- report.json` takes an existing report instead.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
let report = process.argv[2];
if (!report) {
  report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-durations-')), 'report.json');
  const run = spawnSync(process.execPath, [require.resolve('jest/bin/jest'), '--json', `--outputFile=${report}`], { cwd: ROOT, stdio: 'inherit' });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
const { testResults } = JSON.parse(fs.readFileSync(report, 'utf8')) as { testResults: Array<{ name: string; startTime: number; endTime: number }> };
const seconds = testResults
  .map((t) => [path.relative(ROOT, t.name), Math.round((t.endTime - t.startTime) / 100) / 10] as const)
  .filter(([, s]) => s >= 3)
  .sort((a, b) => b[1] - a[1]);
const out = path.join(ROOT, 'test/support/suite-durations.json');
fs.writeFileSync(out, `${JSON.stringify(Object.fromEntries(seconds), null, 1)}\n`);
console.log(`${out}: ${seconds.length} suites of 3 s or more`);
