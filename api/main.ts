// Production API entry: one process, configured by env. Rate limits default to the
// PostgreSQL store (shared by every API process) unless Redis is configured.
import { compose } from '../app/compose';
import { DEFAULT_DATABASE_URL, loadConfig, rateLimitStoreKind } from '../app/config';
import { startApi } from './server';

async function main() {
  const config = loadConfig();
  const rateStore = rateLimitStoreKind(config, 'postgres');
  const c = await compose(config, { role: 'api', databaseUrl: config.DATABASE_URL ?? DEFAULT_DATABASE_URL, embedded: false, temporalAddress: config.TEMPORAL_ADDRESS });
  const { app } = await startApi(c, { rateStore });
  await app.listen({ host: config.HOST, port: config.PORT });
  console.log(`[concierge] API on http://${config.HOST}:${config.PORT} (rate limits: ${rateStore})`);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void c.close().then(() => process.exit(0)));
}

main().catch((err) => {
  console.error(`[concierge] API failed: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
