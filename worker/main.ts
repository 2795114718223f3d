// Production worker entry: one process, configured by env (TEMPORAL_ADDRESS and DATABASE_URL required).
import { compose } from '../app/compose';
import { DEFAULT_DATABASE_URL, loadConfig } from '../app/config';
import { connectWorker, installRuntimeFor } from './connection';
import { preloadModels } from './preload';
import { startWorker } from './runtime';
import { workflowBundleFor } from './worker';

async function main() {
  const config = loadConfig();
  if (!config.TEMPORAL_ADDRESS) throw new Error('TEMPORAL_ADDRESS is required for the worker process (npm start embeds a dev server instead)');
  installRuntimeFor(config);
  const c = await compose(config, { role: 'worker', databaseUrl: config.DATABASE_URL ?? DEFAULT_DATABASE_URL, embedded: false, temporalAddress: config.TEMPORAL_ADDRESS, connectWorker });
  // The voice turn's models load while the worker starts (the first call is then as fast as the rest).
  void preloadModels(c);
  const given = config.TEMPORAL_WORKFLOW_BUNDLE ? { codePath: config.TEMPORAL_WORKFLOW_BUNDLE } : undefined;
  const bundle = workflowBundleFor(given);
  const rt = await startWorker(c, { workflowBundle: given });
  console.log(`[concierge] worker polling task queue '${config.TEMPORAL_TASK_QUEUE}' on ${config.TEMPORAL_ADDRESS}`);
  console.log(`[concierge] workflows: ${bundle ? `prebuilt bundle ${bundle.codePath}` : 'bundled at start (running from source; npm run build prebuilds it)'}`);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void c.close().then(() => process.exit(0)));
  await rt.running;
}

main().catch((err) => {
  console.error(`[concierge] worker failed: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
