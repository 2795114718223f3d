// `npm start`: the whole service in one process on embedded defaults, no configuration
// needed. API + worker here; Temporal dev server and (if needed) PostgreSQL as children.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createApiServer } from '../api/server';
import { dataDir, loadConfig, publicBaseUrl, rateLimitStoreKind } from '../core/config';
import { chooseDatabase } from '../infra/postgres';
import { pickPort } from '../infra/ports';
import { findTemporalCli, startDevServer, type DevServer } from '../infra/temporal';
import { startWorkerRuntime } from '../worker/runtime';
import { startMsgappSandbox } from '../sandbox/msgapp';

const say = (msg: string) => console.log(`[concierge] ${msg}`);

async function main() {
  const config = loadConfig();
  const dir = dataDir(config);
  fs.mkdirSync(dir, { recursive: true });
  const stops: Array<() => Promise<void>> = [];
  const shutdown = async (code: number) => {
    for (const stop of stops.reverse()) await stop().catch((err) => console.error(err));
    process.exit(code);
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void shutdown(0));

  try {
    const db = await chooseDatabase(config.DATABASE_URL, dir);
    stops.push(db.stop);
    say(`database: ${db.description}`);

    let temporalAddress = config.TEMPORAL_ADDRESS;
    let dev: DevServer | null = null;
    if (!temporalAddress) {
      const cli = findTemporalCli({ explicit: config.TEMPORAL_CLI_PATH, install: true });
      dev = await startDevServer({
        cli,
        dbFile: path.join(dir, 'temporal.db'),
        port: config.TEMPORAL_PORT,
        uiPort: config.TEMPORAL_UI_PORT,
        namespace: config.TEMPORAL_NAMESPACE,
        logFile: path.join(dir, 'temporal.log'),
      });
      stops.push(dev.stop);
      temporalAddress = dev.address;
      say(`Temporal: embedded dev server at ${dev.address} (state in ${path.join(dir, 'temporal.db')})`);
    } else {
      say(`Temporal: ${temporalAddress}`);
    }

    // The API's port is chosen now: the msgapp sandbox needs it for its webhook calls.
    const port = process.env.PORT ? config.PORT : await pickPort(config.HOST, config.PORT);
    const base = `http://${config.HOST}:${port}`;
    // Links handed out (media in message.inbound, widget file URLs) are absolute: by default, the address served here.
    config.PUBLIC_BASE_URL ??= publicBaseUrl({ ...config, PORT: port });
    if (!config.MSGAPP_API_BASE) {
      // No provider configured: a local emulator of the Cloud API stands in, calling our webhook.
      const secret = randomBytes(16).toString('hex');
      const sandbox = await startMsgappSandbox({ appSecret: secret, webhookUrl: `${base}/webhooks/msgapp`, host: '127.0.0.1' });
      stops.push(() => sandbox.close());
      config.MSGAPP_API_BASE = sandbox.url;
      config.MSGAPP_APP_SECRET = secret;
      config.MSGAPP_VERIFY_TOKEN ??= randomBytes(8).toString('hex');
      say(`msgapp: no provider configured; using the sandbox at ${sandbox.origin} (inject a customer message: npm run -s msgapp-sandbox -- inbound --sandbox ${sandbox.origin} --from +15551230000 --to <phone_number_id> --text "hi")`);
    } else {
      say(`msgapp: ${config.MSGAPP_API_BASE}`);
    }

    const worker = await startWorkerRuntime(config, { databaseUrl: db.url, temporalAddress, embedded: true });
    stops.push(worker.close);
    worker.running.catch((err) => {
      console.error('[concierge] worker stopped:', err);
      void shutdown(1);
    });

    const rateStore = rateLimitStoreKind(config, 'memory');
    const api = await createApiServer(config, { databaseUrl: db.url, rateStore, embedded: true, temporalAddress });
    stops.push(api.close);
    await api.app.listen({ host: config.HOST, port });
    say(`API:         ${base}/api/v1   (rate limits: ${rateStore} store)`);
    say(`OpenAPI:     ${base}/api/v1/openapi.json`);
    say(`links:       ${config.PUBLIC_BASE_URL} (PUBLIC_BASE_URL)`);
    if (dev) say(`Temporal UI: ${dev.uiUrl}`);
    say(`first key:   npm run -s admin -- workspace create --name Demo   then   npm run -s admin -- key create --workspace <id> --name dev --scopes kb:read,kb:write`);
  } catch (err) {
    console.error(`[concierge] failed to start: ${err instanceof Error ? err.message : err}`);
    await shutdown(1);
  }
}

void main();
