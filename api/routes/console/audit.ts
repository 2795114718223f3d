import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import { userOf } from '../../types';
import { ErrorBody } from '../../schemas/common';
import { AuditEventList, AuditQuery, sessionErrors } from '../../schemas/console';

/** The audit log, newest first (owner and admin). */
export const consoleAuditRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'audit'> }> = async (app, opts) => {
  app.get('/api/console/audit-events', {
    config: { console: 'session', permission: 'readAudit' },
    schema: {
      operationId: 'consoleListAuditEvents',
      summary: "The workspace's audit log, newest first: who, when, from where, on what",
      tags: ['Console: audit log'],
      querystring: AuditQuery,
      response: { 200: AuditEventList, ...sessionErrors, 403: ErrorBody.meta({ description: 'forbidden: only an owner or admin reads the audit log' }) },
    },
    handler: async (request) => opts.services.audit.list(userOf(request).workspaceId, request.query),
  });
};
