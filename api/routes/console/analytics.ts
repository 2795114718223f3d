import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import { windowOf } from '../../../domain/analytics/analytics';
import type { SessionPrincipal } from '../../../domain/people/sessions';
import { ApiError } from '../../http-errors';
import { AnalyticsWindowQuery } from '../../schemas/analytics';
import { HandlingTimes } from '../../schemas/console-analytics';
import { ErrorBody } from '../../schemas/common';
import { sessionErrors } from '../../schemas/console';
import { userOf } from '../../types';

const tags = ['Console: analytics'];
const badWindow = ErrorBody.meta({ description: 'invalid_request: a bad from/to' });
const forbidden = ErrorBody.meta({ description: 'insufficient_scope: the role lacks analytics:read; csrf_failed: from another origin' });

/** Roles with analytics:read (every role today) read the console's analytics; the scope is checked as /api/v1 checks it. */
function reader(user: SessionPrincipal): SessionPrincipal {
  if (!user.scopes.has('analytics:read')) throw new ApiError(403, 'insufficient_scope', `Your role (${user.role}) lacks the 'analytics:read' scope`, { required_scope: 'analytics:read' });
  return user;
}

/**
 * The console's analytics beyond the contract's /api/v1/analytics (docs/console.md "Conversation debugger, messages and
 * analytics"): people's wait and handle times from the inbox. The session's workspace only.
 */
export const consoleAnalyticsRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'analytics'> }> = async (app, opts) => {
  const analytics = opts.services.analytics;

  app.get('/api/console/analytics/handling', {
    config: { console: 'session' },
    schema: {
      operationId: 'consoleAnalyticsHandling',
      summary: "People's wait (queued → taken) and handle times (taken → handed back, closed or re-queued) over the conversations started in a window: medians and 90th percentiles",
      tags,
      querystring: AnalyticsWindowQuery,
      response: { 200: HandlingTimes, ...sessionErrors, 400: badWindow, 403: forbidden },
    },
    handler: async (request) => analytics.handling(reader(userOf(request)).workspaceId, windowOf(request.query)),
  });
};
