// The outbox relay in a process of its own: webhook deliveries' first attempts, knowledge-base indexing starts and
// inbound msgapp messages' hand-offs (worker/runtime.ts startRelay). `npm start` forks it beside its main process
// (worker/relay-process.ts), handing it its configuration over IPC, so the relay's work runs on the second core. Run
// alone (`npm run start:relay`), it reads the environment as worker/main.ts does; a worker process runs a relay of its
// own as well, and any number of relays share the outbox (each row is claimed once).
import { compose } from '../app/compose';
import { DEFAULT_DATABASE_URL, loadConfig, type Config } from '../app/config';
import { metricsJson } from '../app/metrics';
import { startRelay } from './runtime';

/** What `npm start` hands its relay process (IPC, JSON). */
export interface RelayStart {
  kind: 'start';
  config: Config;
  databaseUrl: string;
  temporalAddress: string;
}

/** What the relay process reports to its parent. */
export type RelayReport =
  | { kind: 'hello' }
  | { kind: 'ready' }
  | { kind: 'failed'; message: string }
  | { kind: 'metrics'; req: number; metrics: Awaited<ReturnType<typeof metricsJson>> };
/** The parent asks for this process's metrics (it serves them with its own). */
export interface RelayMetricsRequest {
  kind: 'metrics';
  req: number;
}

/** The parent's configuration, asked for once this process listens. */
function fromParent(): Promise<RelayStart> {
  const given = new Promise<RelayStart>((resolve) => process.once('message', (m: RelayStart) => resolve(m)));
  process.send!({ kind: 'hello' } satisfies RelayReport);
  return given;
}

async function main() {
  const forked = Boolean(process.send) && process.env.CONCIERGE_RELAY_FORKED === '1';
  const start = forked ? await fromParent() : null;
  const config = start?.config ?? loadConfig();
  const temporalAddress = start?.temporalAddress ?? config.TEMPORAL_ADDRESS;
  if (!temporalAddress) throw new Error('TEMPORAL_ADDRESS is required for the relay process');
  const c = await compose(config, {
    role: 'relay',
    databaseUrl: start?.databaseUrl ?? config.DATABASE_URL ?? DEFAULT_DATABASE_URL,
    embedded: forked,
    temporalAddress,
    // Forked, its metrics are served by npm start's main process, which asks for them at each scrape.
    servesMetrics: !forked,
  });
  await startRelay(c);
  const stop = () => void c.close().finally(() => process.exit(0));
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, stop);
  if (forked) {
    // The parent gone (npm start killed hard): nothing is left behind.
    process.once('disconnect', stop);
    process.on('message', (m: RelayMetricsRequest) => {
      if (m?.kind === 'metrics') void metricsJson().then((metrics) => process.connected && process.send!({ kind: 'metrics', req: m.req, metrics } satisfies RelayReport));
    });
    process.send!({ kind: 'ready' } satisfies RelayReport);
  } else {
    console.log(`[concierge] outbox relay running (webhook deliveries, KB indexing starts, inbound msgapp hand-offs) on ${temporalAddress}`);
  }
}

main().catch((err) => {
  const message = err instanceof Error ? err.message : String(err);
  if (process.send && process.connected) process.send({ kind: 'failed', message } satisfies RelayReport);
  console.error(`[concierge] relay failed: ${message}`);
  process.exit(1);
});
