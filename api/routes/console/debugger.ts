import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import { may } from '../../../domain/people/roles';
import { ApiError } from '../../http-errors';
import { ErrorBody } from '../../schemas/common';
import { sessionErrors } from '../../schemas/console';
import { ConversationIdParam, ConversationTurns, ExportedHistory } from '../../schemas/console-debugger';
import { auditOf, userOf } from '../../types';
import type { SessionPrincipal } from '../../../domain/people/sessions';

const tags = ['Console: conversation debugger'];
const notFound = ErrorBody.meta({ description: 'not_found: no such conversation in this workspace (or, for the export, no history yet)' });
const unavailable = ErrorBody.meta({ description: 'workflow_unavailable: this API process has no workflow service' });

/** Roles with conversations:read read the debugger (every role today); the scope is checked as /api/v1 checks it. */
function reader(user: SessionPrincipal): SessionPrincipal {
  if (!user.scopes.has('conversations:read')) throw new ApiError(403, 'insufficient_scope', `Your role (${user.role}) lacks the 'conversations:read' scope`, { required_scope: 'conversations:read' });
  return user;
}

/**
 * The conversation debugger (docs/console.md): each agent turn as the conversation's workflow history recorded it, and
 * the history itself for `npm run replay`. Scoped to the session's workspace (another's conversation: 404).
 */
export const consoleDebuggerRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'conversationDebugger'> }> = async (app, opts) => {
  const debug = opts.services.conversationDebugger;

  app.get('/api/console/conversations/:id/turns', {
    config: { console: 'session' },
    schema: {
      operationId: 'consoleConversationTurns',
      summary: "A conversation's agent turns as its workflow history recorded them: passages and scores, the prompt's parts, tool calls and results, latency by step",
      description: "The model's output before masking only for owners and admins, and each such view is written to the audit log (`conversation.debug_viewed`). Secrets in tool arguments and outputs are redacted.",
      tags,
      params: ConversationIdParam,
      response: { 200: ConversationTurns, ...sessionErrors, 404: notFound, 503: unavailable },
    },
    handler: async (request) => {
      const user = reader(userOf(request));
      return debug.turns({ workspaceId: user.workspaceId, unmasked: may(user.role, 'readUnmaskedOutput'), audit: auditOf(request) }, request.params.id);
    },
  });

  app.get('/api/console/conversations/:id/history', {
    config: { console: 'session', permission: 'exportHistories' },
    schema: {
      operationId: 'consoleExportConversationHistory',
      summary: "The conversation workflow's latest run as a history file for `npm run replay` (owner and admin; audited)",
      tags,
      params: ConversationIdParam,
      response: { 200: ExportedHistory, ...sessionErrors, 404: notFound, 503: unavailable },
    },
    handler: async (request, reply) => {
      const user = userOf(request);
      const exported = await debug.exportHistory({ workspaceId: user.workspaceId, unmasked: true, audit: auditOf(request) }, request.params.id);
      reply.header('content-disposition', `attachment; filename="${exported.file_name}"`);
      return JSON.parse(exported.json) as { events: unknown[] };
    },
  });
};
