// `npm run build`'s last step: the workflow bundle, built once at build time (as the
// Temporal production sample does) so a worker start loads it instead of running webpack.
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { FAILURE_CONVERTER_PATH } from '../lib/crypto/payload-codec';
import { PREBUILT_BUNDLE_PATH, WORKFLOWS_PATH } from './worker';

// webpack's per-module report is noise in a build log; its warnings and errors are kept.
const noop = () => undefined;
const quiet = { trace: noop, debug: noop, info: noop, log: noop, warn: console.warn, error: console.error };

async function main() {
  const out = process.argv[2] ?? PREBUILT_BUNDLE_PATH;
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, failureConverterPath: FAILURE_CONVERTER_PATH, logger: quiet });
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, code);
  console.log(`[concierge] workflow bundle: ${out} (${(code.length / 1024).toFixed(0)} KiB)`);
}

main().catch((err) => {
  console.error(`[concierge] workflow bundle failed: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
