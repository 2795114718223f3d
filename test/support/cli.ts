import { spawn } from 'node:child_process';
import path from 'node:path';
import { Readable } from 'node:stream';
import { runAdmin } from '../../bin/admin';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const ROOT = path.resolve(__dirname, '../..');

/**
 * Runs a TypeScript entry of the repository (`bin/admin.ts …`, a helper script) with tsx in a child process, as an
 * operator would: the run's environment with no encryption key unless the test gives one (the CLI then uses its data
 * directory's key file), `input` on standard input.
 */
export function runTs(args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, env: { ...process.env, CONCIERGE_ENCRYPTION_KEY: '', ...opts.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

/**
 * The admin CLI's run (bin/admin.ts `runAdmin`) in this process, with the same environment rule as `runTs` and its
 * own streams: the same code as `npm run admin` past the process entry, without the seconds a new Node process
 * spends loading the service graph. Tests spawn the entry itself (runTs) only for what a process shows.
 */
export async function runAdminCli(args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runAdmin(args, {
    env: { ...process.env, CONCIERGE_ENCRYPTION_KEY: '', ...opts.env },
    stdin: Readable.from([Buffer.from(opts.input ?? '')]),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  return { code, stdout, stderr };
}
