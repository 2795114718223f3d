// `npm run replay -- [--workflows PATH | --bundle FILE] history.json|DIR ...`: replays workflow histories
// exported from any deployment (`temporal workflow show -w ID --output json`, or the Web UI's JSON download)
// against the current workflow code, one line per history (OK, or the error), exit code 1 when any fails.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DefaultLogger, makeTelemetryFilterString, Runtime, Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import type { DataConverter } from '@temporalio/common';
import { dataDir, loadConfig } from '../app/config';
import { ENCODING_ENCRYPTED, EncryptionCodec, METADATA_KEY_ID, serviceCodec, temporalDataConverter } from '../lib/crypto/payload-codec';
import { SecretBox } from '../lib/crypto/secret-box';
import { WORKFLOWS_PATH, workflowBundleFor } from '../worker/worker';

const USAGE = `usage: npm run -s replay -- [--workflows PATH | --bundle FILE] <history.json | directory>...
  history files: JSON exported with \`temporal workflow show -w ID --output json > ID.json\`, the Web UI's download
                 or its JSON API's (\`{"history": {"events": [...]}}\`);
                 a directory stands for every *.json file in it
  --workflows    the workflows to replay against (a file or directory bundled now, anywhere: packages it imports
                 resolve from its own tree, then this checkout's node_modules; default: this checkout's workflows/)
  --bundle       a prebuilt workflow bundle instead (npm run build writes dist/workflow-bundle.js)
payloads:        encrypted ones (binary/encrypted) are decoded with the key of CONCIERGE_ENCRYPTION_KEY, or else
                 <CONCIERGE_DATA_DIR>/encryption.key, every generation up to TEMPORAL_PAYLOAD_KEY_VERSION;
                 unencrypted ones are read as they are
exit code: 0 when every history replays, 1 when one does not, 2 on a usage error`;

class UsageError extends Error {}

/** The history files named: files as given, directories as their *.json files (sorted). */
export function historyFiles(args: string[]): string[] {
  return args.flatMap((arg) => {
    if (!fs.existsSync(arg)) throw new UsageError(`no such file or directory: ${arg}`);
    if (!fs.statSync(arg).isDirectory()) return [arg];
    const files = fs.readdirSync(arg).filter((f) => f.endsWith('.json')).sort();
    if (!files.length) throw new UsageError(`no *.json history in ${arg}`);
    return files.map((f) => path.join(arg, f));
  });
}

/**
 * A history as exported (`{events: [...]}`), the Web UI's JSON API download (`{history: {events: [...]}}`), or a bare
 * list of events; its workflow type.
 */
export function readHistory(file: string): { history: { events: unknown[] }; workflowType: string } {
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`not JSON: ${(err as Error).message}`);
  }
  const wrapped = json as { history?: { events?: unknown[] } } | null;
  const history = Array.isArray(json) ? { events: json } : wrapped && typeof wrapped.history === 'object' && wrapped.history && !('events' in wrapped) ? wrapped.history : (json as { events?: unknown[] });
  if (!history || !Array.isArray(history.events) || !history.events.length) throw new Error('not a workflow history (no events)');
  const first = history.events[0] as { workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } };
  const workflowType = first.workflowExecutionStartedEventAttributes?.workflowType?.name;
  if (!workflowType) throw new Error('not a workflow history (the first event is not WorkflowExecutionStarted)');
  return { history: history as { events: unknown[] }, workflowType };
}

/**
 * The service's data converter, so encrypted histories decode as the worker decodes them: the key of
 * CONCIERGE_ENCRYPTION_KEY, else the data directory's (npm start). No key: plain histories only.
 */
export function replayDataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter | undefined {
  const config = loadConfig(env);
  const file = path.join(dataDir(config), 'encryption.key');
  const key = config.CONCIERGE_ENCRYPTION_KEY ?? (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined);
  if (!key) return undefined;
  return temporalDataConverter(serviceCodec(SecretBox.fromString(key), config.TEMPORAL_PAYLOAD_KEY_VERSION));
}

/** Whether a history holds payloads of the service's codec (exports spell metadata in base64, the UI's download in text). */
export function isEncrypted(history: { events: unknown[] }): boolean {
  const text = JSON.stringify(history);
  return text.includes(`"${Buffer.from(ENCODING_ENCRYPTED).toString('base64')}"`) || text.includes(`"${ENCODING_ENCRYPTED}"`);
}

/** The key ids a history's payloads name that the data converter's codec cannot decrypt. */
function missingKeyIds(history: { events: unknown[] }, dc: DataConverter | undefined): string[] {
  const codec = dc?.payloadCodecs?.find((c): c is EncryptionCodec => c instanceof EncryptionCodec);
  if (!codec) return [];
  const ids = new Set<string>();
  const walk = (v: unknown): void => {
    if (!v || typeof v !== 'object') return;
    const raw = (v as Record<string, unknown>)[METADATA_KEY_ID];
    if (typeof raw === 'string') {
      // Exports spell metadata values in base64, the UI's download as text.
      const decoded = Buffer.from(raw, 'base64').toString('utf8');
      ids.add(/^g\d+-[0-9a-f]+$/.test(raw) ? raw : decoded);
    }
    for (const x of Object.values(v)) walk(x);
  };
  walk(history.events);
  return [...ids].filter((id) => !codec.holds(id));
}

/** The node_modules that holds this command's @temporalio/workflow (the checkout's, from source or from dist/). */
const OUR_MODULES = path.resolve(require.resolve('@temporalio/workflow/package.json'), '../../..');

/**
 * Workflows outside the checkout (an old version checked out elsewhere, `git worktree`, an export) have no
 * node_modules above them: the bundle resolves packages from their own tree first, then from this checkout's.
 */
function withOurModules<C extends { resolve?: { modules?: string[] } }>(config: C): C {
  const modules = config.resolve?.modules ?? ['node_modules'];
  return { ...config, resolve: { ...config.resolve, modules: [...modules, OUR_MODULES] } };
}

function replayOptions(values: { workflows?: string; bundle?: string }): ReplayWorkerOptions {
  if (values.workflows && values.bundle) throw new UsageError('give --workflows or --bundle, not both');
  if (values.bundle) {
    if (!fs.existsSync(values.bundle)) throw new UsageError(`no such bundle: ${values.bundle}`);
    return { workflowBundle: { codePath: path.resolve(values.bundle) } };
  }
  if (values.workflows) {
    if (!fs.existsSync(values.workflows)) throw new UsageError(`no such workflows path: ${values.workflows}`);
    return { workflowsPath: require.resolve(path.resolve(values.workflows)), bundlerOptions: { webpackConfigHook: withOurModules } };
  }
  // Compiled (node dist/bin/replay.js): the prebuilt bundle beside it; from source: this checkout's workflows.
  const prebuilt = workflowBundleFor();
  return prebuilt ? { workflowBundle: prebuilt } : { workflowsPath: WORKFLOWS_PATH };
}

/** Replays every file; prints one line each; resolves to the number that failed. */
export async function replay(files: string[], options: ReplayWorkerOptions, out: (line: string) => void): Promise<number> {
  const loaded = files.map((file) => {
    try {
      const read = readHistory(file);
      // Without the key the replay would fail deep in the SDK with an encoded failure: say what is missing instead.
      if (!options.dataConverter && isEncrypted(read.history)) {
        return { file, error: `${read.workflowType}: its payloads are encrypted (binary/encrypted): set CONCIERGE_ENCRYPTION_KEY to the key of the deployment that wrote it` };
      }
      const missing = missingKeyIds(read.history, options.dataConverter);
      if (missing.length) {
        return { file, error: `${read.workflowType}: its payloads are encrypted with key id ${missing.join(', ')}, which the key given does not hold (CONCIERGE_ENCRYPTION_KEY, TEMPORAL_PAYLOAD_KEY_VERSION)` };
      }
      return { file, ...read };
    } catch (err) {
      return { file, error: (err as Error).message };
    }
  });
  let failed = 0;
  for (const l of loaded) {
    if ('error' in l) {
      failed++;
      out(`FAIL ${l.file}: ${l.error}`);
    }
  }
  const good = loaded.filter((l): l is { file: string; history: { events: unknown[] }; workflowType: string } => !('error' in l));
  if (!good.length) return failed;
  // The file name identifies each history in the results (ids may repeat across exports).
  const results = Worker.runReplayHistories(
    options,
    good.map((g) => ({ workflowId: g.file, history: g.history })),
  );
  for await (const r of results) {
    const g = good.find((x) => x.file === r.workflowId)!;
    if (r.error) {
      failed++;
      out(`FAIL ${g.file} (${g.workflowType}): ${r.error.name}: ${r.error.message.split('\n')[0]}`);
    } else {
      out(`OK   ${g.file} (${g.workflowType})`);
    }
  }
  return failed;
}

async function main(): Promise<number> {
  let values: { workflows?: string; bundle?: string; help?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: process.argv.slice(2),
      allowPositionals: true,
      options: { workflows: { type: 'string' }, bundle: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (err) {
    console.error(`error: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  try {
    if (!positionals.length) throw new UsageError('no history given');
    const files = historyFiles(positionals);
    const options: ReplayWorkerOptions = { ...replayOptions(values), dataConverter: replayDataConverter() };
    // Quiet: the bundler's and the SDK's own logs would bury the per-file lines.
    Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
    const failed = await replay(files, options, (line) => console.log(line));
    console.log(failed ? `${failed} of ${files.length} histories failed to replay` : `${files.length} histories replayed`);
    return failed ? 1 : 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`error: ${err.message}\n${USAGE}`);
      return 2;
    }
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

if (require.main === module) void main().then((code) => process.exit(code));
