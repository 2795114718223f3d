import type { FastifyInstance, HTTPMethods } from 'fastify';
import { ApiError } from '../http-errors';

/** The order of the methods a path serves in `Allow` (every route serves some of these). */
const ALLOW_ORDER: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * RFC 9110 §15.5.6: a known path asked for with a method it does not serve is 405
 * `method_not_allowed` with an `Allow` header, not 404. Registered after every other
 * route: each known path gets one route for the methods it lacks, so the answer comes
 * from Fastify's own router (same matching, parameters and trailing-slash rules as the
 * real routes) and costs nothing on the served paths.
 */
export async function registerMethodNotAllowed(app: FastifyInstance): Promise<void> {
  // Every method Fastify routes (TRACE and RFC 10008's QUERY included: a QUERY that reached the
  // not-found route would be refused for its missing Content-Type before any 405 or 404), except
  // OPTIONS, which the CORS preflight route answers everywhere.
  const methods = app.supportedMethods.filter((m) => m !== 'OPTIONS') as HTTPMethods[];
  const served = new Map<string, Set<string>>();
  for (const route of app.routeTable) {
    if (route.method === 'OPTIONS') continue;
    const set = served.get(route.url) ?? new Set<string>();
    set.add(route.method);
    if (route.method === 'GET') set.add('HEAD');
    served.set(route.url, set);
  }
  for (const [url, servedHere] of served) {
    const missing = methods.filter((m) => !servedHere.has(m));
    if (missing.length === 0) continue;
    const allow = [...ALLOW_ORDER.filter((m) => servedHere.has(m)), 'OPTIONS'].join(', ');
    app.route({
      method: missing,
      url,
      config: { methodNotAllowed: true },
      schema: { hide: true },
      // In onRequest, before any body is read: a PUT with an unknown Content-Type is still a 405, not a 415.
      onRequest: async (request) => {
        throw new ApiError(405, 'method_not_allowed', `${request.method} is not allowed on ${url.replace(/:(\w+)/g, '{$1}')}; allowed: ${allow}`, {}, { Allow: allow });
      },
      handler: async () => {
        throw new Error('unreachable: the onRequest hook answers 405');
      },
    });
  }
}
