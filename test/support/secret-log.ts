import fs from 'node:fs';
import path from 'node:path';
import pino, { type Logger } from 'pino';
import type { SecretBox } from '../../lib/crypto/secret-box';

/**
 * "Secrets never leave": every process of a test run logs (at info) into files under
 * TEST_LOG_DIR (set by global-setup.ts, inherited by the Jest workers) and records
 * every secret it creates or learns into `secrets.<pid>.tsv` beside them. The global
 * teardown scans every log for every recorded secret (scanLogs) and fails the run.
 */
export type SecretKind = 'api key' | 'session token' | 'site secret' | 'webhook secret' | 'provider token' | 'user_hash' | 'msgapp app secret' | 'msgapp verify token' | 's3 secret access key' | 'sso client secret' | 'oauth code' | 'totp secret';

export const LOG_LEVEL = 'info';

/** The run's log directory; null when the tests run without the global setup (nothing is recorded). */
export function testLogDir(): string | null {
  return process.env.TEST_LOG_DIR ?? null;
}

/** A log file of this process (a Jest worker, or a child it spawns) under the run's log directory. */
export function testLogFile(name: string): string | null {
  const dir = testLogDir();
  return dir ? path.join(dir, `${name}.${process.pid}.log`) : null;
}

const recorded = new Set<string>();

/** Shorter values could match by chance. */
const MIN_SECRET_LENGTH = 12;
/**
 * Nor is a value of a few repeated characters a secret (a test's deliberately wrong hash
 * '000…'): the fuzzer generates such strings in any field. Generated secrets are random.
 */
const MIN_DISTINCT_CHARACTERS = 6;

export function recordSecret(kind: SecretKind, value: string | null | undefined): void {
  const dir = testLogDir();
  if (!dir || !value || value.length < MIN_SECRET_LENGTH || new Set(value).size < MIN_DISTINCT_CHARACTERS || /[\t\n]/.test(value)) return;
  const line = `${kind}\t${value}\n`;
  if (recorded.has(line)) return;
  recorded.add(line);
  // Synchronous and rare (a secret is created a few times per test): no buffered state to lose.
  fs.appendFileSync(path.join(dir, `secrets.${process.pid}.tsv`), line, { mode: 0o600 });
}

let sharedDestination: pino.DestinationStream | null = null;

/**
 * One append-only destination per process for every logger the test support builds
 * (the apps, key caches, dispatchers, the Temporal runtime): synchronous writes, so a
 * process that ends abruptly loses nothing, and cheap at info level.
 */
export function testLogDestination(): pino.DestinationStream | null {
  const file = testLogFile('app');
  if (!file) return null;
  sharedDestination ??= pino.destination({ dest: file, sync: true, append: true, mkdir: true });
  return sharedDestination;
}

/** A pino logger into this process's log file (silent when the run has no log directory). */
export function testLogger(): Logger {
  const dest = testLogDestination();
  if (!dest) return pino({ level: 'silent' });
  // A slow shutdown step (app/compose.ts names it) also goes to the console: a teardown that drags says which part.
  const slowShutdown = { write: (line: string) => void (line.includes('"msg":"shutdown: ') && process.stderr.write(line)) };
  return pino({ level: LOG_LEVEL }, pino.multistream([{ stream: dest }, { level: 'warn', stream: slowShutdown }]));
}

/** Appends one line to this process's log file (for loggers that are not pino). */
export function writeTestLog(line: string): void {
  testLogDestination()?.write(`${line}\n`);
}

/**
 * The box as the test services use it, recording every secret it seals: `whsec_` and
 * site secrets by their prefix, provider tokens by the `cred_` id they are bound to.
 * Everything else it seals (stored idempotent responses) is not a secret of its own.
 */
export function recordingBox(box: SecretBox): SecretBox {
  const wrapped = Object.create(box) as SecretBox;
  wrapped.seal = (plaintext: string, associatedData: string) => {
    if (plaintext.startsWith('whsec_')) recordSecret('webhook secret', plaintext);
    else if (plaintext.startsWith('sitesec_')) recordSecret('site secret', plaintext);
    else if (associatedData.startsWith('cred_')) recordSecret('provider token', plaintext);
    return box.seal(plaintext, associatedData);
  };
  return wrapped;
}

export interface LogFinding {
  file: string;
  kind: SecretKind;
}

/** Every (log file, kind of secret) where a recorded secret appears in a log of the run. */
export function scanLogs(dir: string): LogFinding[] {
  if (!fs.existsSync(dir)) return [];
  const names = fs.readdirSync(dir);
  const secrets = new Map<string, SecretKind>();
  for (const name of names.filter((n) => n.endsWith('.tsv'))) {
    for (const line of fs.readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      const tab = line.indexOf('\t');
      if (tab > 0) secrets.set(line.slice(tab + 1), line.slice(0, tab) as SecretKind);
    }
  }
  const findings: LogFinding[] = [];
  if (!secrets.size) return findings;
  // One alternation over every secret (longest first, so none hides a longer one): a
  // single pass per log, where thousands of indexOf passes over megabytes take seconds.
  const escape = (v: string) => v.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const pattern = new RegExp([...secrets.keys()].sort((a, b) => b.length - a.length).map(escape).join('|'), 'g');
  for (const name of names.filter((n) => n.endsWith('.log'))) {
    const text = fs.readFileSync(path.join(dir, name), 'utf8');
    const kinds = new Set<SecretKind>();
    for (const match of text.matchAll(pattern)) kinds.add(secrets.get(match[0])!);
    for (const kind of kinds) findings.push({ file: path.join(dir, name), kind });
  }
  return findings;
}
