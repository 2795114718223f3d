import type { FastifyPluginAsync } from 'fastify';
import type { Scope } from '../../core/auth/scopes';
import { ApiError } from '../../core/errors';
import { authErrors, ErrorBody } from '../schemas/common';

/**
 * Endpoints of the contract that are not built yet. They are registered with their
 * real scopes, so auth and deny-by-default apply to them exactly as they will once
 * built, and they answer 501 `not_implemented` instead of a misleading 404. Each
 * issue that builds an area removes its rows here. The README lists what is missing.
 */
const PLANNED: Array<[method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, scope: Scope, operationId: string, area: string]> = [
];

export const plannedRoutes: FastifyPluginAsync = async (app) => {
  for (const [method, url, scope, operationId, area] of PLANNED) {
    app.route({
      method,
      url,
      config: { scope },
      schema: {
        operationId,
        tags: [area],
        summary: 'Not built yet: answers 501 not_implemented after authentication',
        response: { ...authErrors, 501: ErrorBody.meta({ description: 'not_implemented' }) },
      },
      // Route-level onRequest runs after the auth guard and before the body is parsed,
      // so any body (multipart included) gets the same clear answer.
      onRequest: async () => {
        throw new ApiError(501, 'not_implemented', `${method} ${url.replace(/:(\w+)/g, '{$1}')} is part of the API contract but not built yet in this release`);
      },
      handler: async () => undefined,
    });
  }
};
