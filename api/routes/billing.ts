import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { Credits, UsageList, UsageQuery } from '../schemas/billing';
import { authErrors, ErrorBody } from '../schemas/common';

const tags = ['Analytics'];

/** Credits and usage (scope analytics:read, as the contract's scope table has it). */
export const billingRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'credits'> }> = async (app, opts) => {
  app.get('/api/v1/billing/credits', {
    config: { scope: 'analytics:read' },
    schema: { operationId: 'getBillingCredits', summary: 'The credits balance: granted, used, left', tags, response: { 200: Credits, ...authErrors } },
    handler: async (request) => opts.services.credits.balance(authOf(request).workspaceId),
  });

  app.get('/api/v1/billing/usage', {
    config: { scope: 'analytics:read' },
    schema: {
      operationId: 'getBillingUsage',
      summary: 'Usage by UTC day and kind, newest first, priced',
      tags,
      querystring: UsageQuery,
      response: { 200: UsageList, ...authErrors, 400: ErrorBody.meta({ description: 'invalid_request: a bad from, to or cursor, or from not before to' }) },
    },
    handler: async (request) => opts.services.credits.usage(authOf(request).workspaceId, request.query),
  });
};
