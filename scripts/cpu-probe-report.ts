import fs from 'node:fs';
import path from 'node:path';

/**
 * Sums a JEST_CPU_PROBE file (test/support/cpu-probe.ts): per test file, the CPU its worker spent from the file's
 * start to the next file's start in the same worker (or to its own end), and the wall time; largest first.
 */
type Row = { kind: 'start' | 'end'; pid: number; file: string; t: number; cpu: number };
const rows: Row[] = fs
  .readFileSync(process.argv[2], 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as Row);
const byPid = new Map<number, Row[]>();
for (const r of rows) byPid.set(r.pid, [...(byPid.get(r.pid) ?? []), r]);
const result: { file: string; cpu: number; wall: number }[] = [];
for (const list of byPid.values()) {
  list.sort((a, b) => a.t - b.t);
  const starts = list.filter((r) => r.kind === 'start');
  starts.forEach((s, i) => {
    const next = starts[i + 1];
    const end = next ?? list.filter((r) => r.kind === 'end' && r.file === s.file).pop();
    if (!end) return;
    result.push({ file: path.relative(process.cwd(), s.file), cpu: end.cpu - s.cpu, wall: (end.t - s.t) / 1000 });
  });
}
result.sort((a, b) => b.cpu - a.cpu);
let total = 0;
for (const r of result) {
  total += r.cpu;
  console.log(`${r.cpu.toFixed(1).padStart(7)} CPU-s ${r.wall.toFixed(1).padStart(7)} s  ${r.file}`);
}
console.log(`${total.toFixed(1).padStart(7)} CPU-s in ${result.length} files`);
