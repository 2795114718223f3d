import { Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The process's one Prometheus registry, with Node's default metrics. The domain registers its outcome
 * counters on it (domain/metrics.ts), the composition root its HTTP and backlog metrics and the scrape
 * endpoints (app/metrics.ts).
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });
