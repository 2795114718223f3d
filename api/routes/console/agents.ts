import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import { ErrorBody, idParam } from '../../schemas/common';
import { sessionErrors } from '../../schemas/console';
import { TryAgentBody, TryAgentResult } from '../../schemas/console-agents';
import { userOf } from '../../types';

const tags = ['Console: agents'];

/**
 * The agent builder's "Try it" (docs/console.md): one real turn in a test conversation that no conversation list,
 * analytics or billing counts, tools that act outside stubbed. Owners and admins (who may edit agents); scoped to the
 * session's workspace in AgentTrials.
 */
export const consoleAgentRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'agentTrials'> }> = async (app, opts) => {
  app.post('/api/console/agents/:id/try', {
    config: { console: 'session', permission: 'tryAgents' },
    schema: {
      operationId: 'consoleTryAgent',
      summary: "Run one real turn of the agent in a test conversation (kept out of lists, analytics and billing); tools that act outside are recorded, not run",
      tags,
      params: idParam('agt'),
      body: TryAgentBody,
      response: {
        200: TryAgentResult,
        400: ErrorBody.meta({ description: 'invalid_request: the message is empty or too long (the message names the field)' }),
        ...sessionErrors,
        403: ErrorBody.meta({ description: "forbidden: only an owner or admin tries agents; csrf_failed: without the session's X-CSRF-Token or from another origin" }),
        404: ErrorBody.meta({ description: 'not_found: no such agent in this workspace, or no such test conversation with it' }),
        409: ErrorBody.meta({ description: 'conversation_closed: the test conversation is closed; task_in_progress' }),
        503: ErrorBody.meta({ description: 'workflow_unavailable: the workflow service is not connected' }),
      },
    },
    handler: async (request) => opts.services.agentTrials.run(userOf(request).workspaceId, request.params.id, request.body),
  });
};
