import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '../..');
const run = promisify(execFile);

/** What dist/ is built from (scripts/setup.sh checks the same list). */
const BUILD_SOURCES = ['api', 'app', 'domain', 'providers', 'lib', 'db', 'workflows', 'activities', 'worker', 'bin', 'dev', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

function newestMtime(p: string): number {
  const st = fs.statSync(p, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of fs.readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, entry)));
  return newest;
}

/**
 * Whether dist/ is newer than every file it is built from (`npm run setup` builds it on a fresh machine, so a run
 * there checks the built files without building them a second time; after a change to a source, the tests build).
 */
export function distIsFresh(): boolean {
  const built = fs.statSync(path.join(ROOT, 'dist', 'workflow-bundle.js'), { throwIfNoEntry: false })?.mtimeMs;
  return built !== undefined && BUILD_SOURCES.every((s) => newestMtime(path.join(ROOT, s)) <= built);
}

/**
 * `npm run build` once per Jest run, unless dist/ is already newer than its sources (distIsFresh), for every suite that runs the compiled entries (compiled-build, cluster). The
 * build starts by removing dist/, so a second build while another suite's processes run from dist/ would pull it
 * from under them (a worker forks dist/lib/extract/child.js long after it started). The first caller builds; the
 * others wait for its verdict, kept in the run's temporary directory (global-setup.ts), which no other run shares.
 */
export async function buildOnce(timeoutMs = 300_000): Promise<void> {
  const bundle = process.env.TEST_WORKFLOW_BUNDLE;
  if (!bundle) throw new Error('run the tests through jest (global-setup.ts)');
  const dir = path.join(path.dirname(bundle), 'build');
  const verdict = path.join(dir, 'verdict');
  let mine = true;
  try {
    fs.mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    mine = false;
  }
  if (mine) {
    let outcome = 'ok';
    try {
      if (!distIsFresh()) await run('npm', ['run', '-s', 'build'], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
    } catch (err) {
      const e = err as Error & { stdout?: string; stderr?: string };
      outcome = `npm run build failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`;
    }
    // Written whole, then renamed: a waiting suite never reads half a verdict.
    fs.writeFileSync(`${verdict}.tmp`, outcome);
    fs.renameSync(`${verdict}.tmp`, verdict);
  }
  const deadline = Date.now() + timeoutMs;
  while (!fs.existsSync(verdict)) {
    if (Date.now() > deadline) throw new Error('timed out waiting for another suite to run npm run build');
    await new Promise((r) => setTimeout(r, 250));
  }
  const outcome = fs.readFileSync(verdict, 'utf8');
  if (outcome !== 'ok') throw new Error(outcome);
}

/**
 * The console's build (console/dist), once per machine rather than per run: `npm run setup` makes it, and so does
 * `npm run build`; a suite that serves the console builds it here only when it is missing or older than its sources.
 * Building twice at once is harmless (scripts/console-build.ts swaps files in, the folder never disappears).
 */
export async function buildConsoleOnce(timeoutMs = 300_000): Promise<void> {
  const index = path.join(ROOT, 'console', 'dist', 'index.html');
  const built = fs.statSync(index, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const sources = [path.join(ROOT, 'console', 'index.html'), ...fs.readdirSync(path.join(ROOT, 'console', 'src'), { recursive: true }).map((f) => path.join(ROOT, 'console', 'src', String(f)))];
  if (built && sources.every((f) => (fs.statSync(f, { throwIfNoEntry: false })?.mtimeMs ?? 0) <= built)) return;
  await run(process.execPath, ['--import', 'tsx', 'scripts/console-build.ts'], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
}
