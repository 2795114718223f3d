import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../http-errors';
import { bearerMatches, observeHttp, renderMetrics } from '../../app/metrics';

export interface MetricsOptions {
  /** METRICS_TOKEN; null: GET /metrics answers 404 on this port (the metrics may still have a port of their own, METRICS_PORT). */
  token: string | null;
}

/**
 * Prometheus metrics of the API (app/metrics.ts): every answered request counted and
 * timed by method, route pattern (never the raw URL: `unmatched` when no route took it)
 * and status code; and GET /metrics on the API's own port, only when METRICS_TOKEN is set
 * and only with `Authorization: Bearer <METRICS_TOKEN>` (the process's metrics name every
 * route and backlog: not for the public). Not an API-key route: `public` to the key guard,
 * hidden from the OpenAPI document. As a fastify-plugin, so its hook sees every route.
 */
export const metricsPlugin = fp(async (app: FastifyInstance, opts: MetricsOptions) => {
  app.addHook('onResponse', async (request, reply) => {
    observeHttp(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
  });

  app.get('/metrics', { config: { public: true }, schema: { hide: true } }, async (request, reply) => {
    if (!opts.token) throw new ApiError(404, 'not_found', 'Metrics are off on this port: set METRICS_TOKEN (or METRICS_PORT for a listener of their own)');
    if (!bearerMatches(request.headers.authorization, opts.token)) {
      throw new ApiError(401, 'invalid_metrics_token', 'Authorization: Bearer <METRICS_TOKEN> is missing or wrong', {}, { 'WWW-Authenticate': 'Bearer' });
    }
    const { contentType, body } = await renderMetrics();
    return reply.type(contentType).send(body);
  });
});
