// `npm start`: the whole service on embedded defaults, no configuration needed. API + worker
// here, the outbox relay in a second process; Temporal dev server and (if needed) PostgreSQL as children.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startApi } from '../api/server';
import { CODEC_PREFIX } from '../api/routes/temporal-codec';
import { compose, localModelFiles, type Composition } from '../app/compose';
import { dataDir, loadConfig, publicBaseUrl, rateLimitStoreKind, type Config } from '../app/config';
import { chooseDatabase } from '../dev/embedded/postgres';
import { pickPort } from '../dev/embedded/ports';
import { findTemporalCli, startDevServer, type DevServer } from '../dev/embedded/temporal';
import { connectWorker, installRuntimeFor } from '../worker/connection';
import { startWorker } from '../worker/runtime';
import { startRelayProcess } from '../worker/relay-process';
import { setPeerMetrics } from '../app/metrics';
import { preloadModels } from '../worker/preload';
import { SEARCH_ATTRIBUTE_FLAGS } from '../worker/namespace-attributes';
import { localIceCidrs } from '../providers/webrtc/ice';
import { startMsgappSandbox } from '../dev/fake-msgapp';
import { CLI_CONTEXT } from '../domain/audit/audit-log';

const say = (msg: string) => console.log(`[concierge] ${msg}`);

/** Where POST /api/v1/documents/extract_structured gets its model. */
function describeStructured(config: Config): string {
  if (config.STRUCTURED_BASE_URL) return `${config.STRUCTURED_BASE_URL} (STRUCTURED_BASE_URL), model ${config.STRUCTURED_MODEL ?? 'default'}`;
  const local = localModelFiles(config);
  if (local) {
    return `local model ${local.modelName} (${local.model}), served by ${local.binary} on 127.0.0.1, started on the first extraction, stopped after ${Math.round(config.STRUCTURED_LOCAL_IDLE_MS / 1000)} s idle`;
  }
  if (config.LLM_BASE_URL) return `${config.LLM_BASE_URL} (LLM_BASE_URL), model ${config.STRUCTURED_MODEL ?? config.LLM_MODEL}`;
  return 'no model (npm run models:fetch installs the local one, or set STRUCTURED_BASE_URL / LLM_BASE_URL); the endpoint answers 503 llm_not_configured';
}

/** Where Prometheus scrapes this process (docs/operations.md "Metrics"): nothing is served unless configured. */
function describeMetrics(config: Config, base: string): string {
  const where = [
    config.METRICS_TOKEN ? `${base}/metrics (Bearer METRICS_TOKEN)` : null,
    config.METRICS_PORT !== undefined ? `http://${config.METRICS_HOST}:${config.METRICS_PORT}/metrics` : null,
    config.TEMPORAL_METRICS_PORT ? `Temporal SDK at http://${config.METRICS_HOST}:${config.TEMPORAL_METRICS_PORT}/metrics` : null,
  ].filter(Boolean);
  return where.length ? where.join(', ') : 'off (set METRICS_TOKEN or METRICS_PORT, and TEMPORAL_METRICS_PORT)';
}

/** Whether HOST is a loopback address (only this machine reaches the API). */
const isLoopback = (host: string) => host === 'localhost' || host === '::1' || host.startsWith('127.');

/** The email of the first owner npm start makes on a fresh install (change it in the console once signed in). */
export const FIRST_OWNER_EMAIL = 'owner@localhost';

/**
 * A fresh install is claimed from the terminal that started it: while the default workspace (the oldest; one named
 * "Default" is made when there is none) has no signed-in user, a one-time sign-in link for its first owner is printed.
 */
export async function claimFreshInstall(c: Composition): Promise<{ user: { email: string }; link: { url: string; expires_at: string } } | null> {
  const em = c.em.fork();
  const workspaces = c.services.repos.workspaces;
  const ws = (await workspaces.listWorkspaces(em))[0] ?? (await workspaces.createWorkspace(em, 'Default'));
  return c.services.people.claimLink(ws.id, FIRST_OWNER_EMAIL, CLI_CONTEXT);
}

export interface Started {
  composition: Composition;
  /** The API's origin. */
  base: string;
  /** The outbox relay's process, when it runs apart (CONCIERGE_RELAY_PROCESS=on). */
  relayPid: () => number | undefined;
  /** Stops everything started, last first. */
  stop(): Promise<void>;
}

/**
 * The whole service: PostgreSQL (the configured one, or an embedded one), Temporal (the
 * configured one, or an embedded dev server), the msgapp sandbox when no provider is
 * configured, then one composition (role `both`) serving the API and running the worker
 * in this process, and the outbox relay in a second one (CONCIERGE_RELAY_PROCESS).
 */
export async function startAll(config: Config, onWorkerStopped: (err: unknown) => void): Promise<Started> {
  const dir = dataDir(config);
  fs.mkdirSync(dir, { recursive: true });
  const stops: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch((err) => console.error(err));
  };
  try {
    // A browser on this machine offers only local ICE candidates, which production refuses (providers/webrtc/ice.ts): an API
    // that only this machine can reach allows them, unless the operator chose an allowance.
    if (!process.env.VOICE_ICE_ALLOW_CIDRS && isLoopback(config.HOST)) config.VOICE_ICE_ALLOW_CIDRS = localIceCidrs();
    const db = await chooseDatabase(config.DATABASE_URL, dir);
    stops.push(db.stop);
    say(`database: ${db.description}`);

    // The API's port is chosen now: the msgapp sandbox needs it for its webhook calls, the Temporal UI for its codec.
    const port = process.env.PORT ? config.PORT : await pickPort(config.HOST, config.PORT);
    const base = `http://${config.HOST}:${port}`;

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
        searchAttributes: SEARCH_ATTRIBUTE_FLAGS,
        // The UI shows decoded payloads through the API's codec endpoint. A browser UI cannot add the
        // Authorization header, so the token is the path segment the protocol allows (api/routes/temporal-codec.ts);
        // one is generated per start when none is configured.
        uiCodecEndpoint: `${base}${CODEC_PREFIX}/${(config.TEMPORAL_CODEC_TOKEN ??= randomBytes(32).toString('hex'))}`,
      });
      stops.push(dev.stop);
      temporalAddress = dev.address;
      // Its UI may have moved to a free port: that origin may call the codec endpoint too, and comes first, as the
      // console's debugger links to the first origin's UI.
      if (!config.TEMPORAL_UI_ORIGIN.includes(dev.uiUrl)) config.TEMPORAL_UI_ORIGIN.unshift(dev.uiUrl);
      say(`Temporal: embedded dev server at ${dev.address} (state in ${path.join(dir, 'temporal.db')})`);
    } else {
      say(`Temporal: ${temporalAddress}`);
    }

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

    // Temporal's runtime first (its SDK metrics exporter when TEMPORAL_METRICS_PORT is set).
    installRuntimeFor(config);
    // One composition for both roles: one ORM, one LISTEN connection, one embedder, one extraction pool.
    const c = await compose(config, { role: 'both', databaseUrl: db.url, embedded: true, temporalAddress, connectWorker });
    stops.push(() => c.close());
    // The voice turn's models load while the worker starts (the first call is then as fast as the rest).
    void preloadModels(c);
    // The outbox relay in a second process by default (CONCIERGE_RELAY_PROCESS), so its deliveries run on the other core.
    const relayApart = config.CONCIERGE_RELAY_PROCESS === 'on';
    // A prebuilt workflow bundle when one is given (as worker/main.ts takes it), else bundled at start.
    const workflowBundle = config.TEMPORAL_WORKFLOW_BUNDLE ? { codePath: config.TEMPORAL_WORKFLOW_BUNDLE } : undefined;
    const worker = await startWorker(c, { dispatcher: !relayApart, workflowBundle });
    worker.running.catch(onWorkerStopped);
    let relayPid = () => undefined as number | undefined;
    if (relayApart) {
      const relay = await startRelayProcess({ config, databaseUrl: db.url, temporalAddress });
      // Stopped before the composition closes (stops run last first): no relayed work is cut off by a closed pool.
      stops.push(() => relay.stop());
      // Its counters (webhook attempts) are served with this process's metrics.
      const unsetPeer = setPeerMetrics(() => relay.metrics());
      stops.push(async () => unsetPeer());
      relayPid = relay.pid;
      say(`relay:       outbox relay in process ${relay.pid()} (webhook deliveries, KB indexing starts, inbound msgapp hand-offs; CONCIERGE_RELAY_PROCESS=off keeps it here)`);
    }
    const rateStore = rateLimitStoreKind(config, 'memory');
    const { app } = await startApi(c, { rateStore });
    await app.listen({ host: config.HOST, port });
    say(`API:         ${base}/api/v1   (rate limits: ${rateStore} store)`);
    say(`OpenAPI:     ${base}/api/v1/openapi.json`);
    say(`links:       ${config.PUBLIC_BASE_URL} (PUBLIC_BASE_URL)`);
    if (dev) say(`Temporal UI: ${dev.uiUrl}   (payloads are encrypted; the UI decodes them through ${base}${CODEC_PREFIX})`);
    say(`extraction:  ${describeStructured(config)}`);
    say(`metrics:     ${describeMetrics(config, base)}`);
    say(`first key:   npm run -s admin -- workspace create --name Demo   then   npm run -s admin -- key create --workspace <id> --name dev --scopes kb:read,kb:write`);
    const claim = await claimFreshInstall(c);
    if (claim) say(`console:     ${config.PUBLIC_BASE_URL}/console/   first owner ${claim.user.email}: sign in once at ${claim.link.url} (valid until ${claim.link.expires_at}; choose a password there)`);
    else say(`console:     ${config.PUBLIC_BASE_URL}/console/`);
    return { composition: c, base, relayPid, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function main() {
  let started: Started | null = null;
  const shutdown = async (code: number) => {
    await started?.stop();
    process.exit(code);
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void shutdown(0));
  try {
    started = await startAll(loadConfig(), (err) => {
      console.error('[concierge] worker stopped:', err);
      void shutdown(1);
    });
  } catch (err) {
    console.error(`[concierge] failed to start: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  }
}

if (require.main === module) void main();
