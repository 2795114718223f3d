import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { authErrors, ErrorBody, idParam } from '../schemas/common';
import { Agent, AgentList, CreateAgentBody, FromSpecBody, GenerateAgentBody, ListAgentsQuery, PatchAgentBody } from '../schemas/agents';

const AgtId = idParam('agt');

/** The refusals of a msgapp number claim, answered by publish and by edits of a published agent alike. */
const numberClaimErrors = {
  409: ErrorBody.meta({ description: 'number_in_use: another published agent already claims the msgapp phone_number_id (`agent_id` only when it is in this workspace)' }),
  422: ErrorBody.meta({ description: "number_not_owned: the provider does not confirm that the agent's credential owns the msgapp phone_number_id; `reasons` says why" }),
  502: ErrorBody.meta({ description: 'provider_error: the provider could not be asked now; nothing changed, try again' }),
} as const;

const tags = ['Agents'];
const notFound = ErrorBody.meta({ description: 'not_found' });
/** Every write of a spec checks the llm credential it names. */
const credentialNotFound = ErrorBody.meta({ description: 'credential_not_found: model.credential_id names no llm credential of this workspace' });
const agentNotFound = ErrorBody.meta({ description: 'not_found: no such agent; credential_not_found: model.credential_id names no llm credential of this workspace' });

export const agentRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'agents'> }> = async (app, opts) => {
  const agents = opts.services.agents;

  app.get('/api/v1/agents', {
    config: { scope: 'workflows:read' },
    schema: { operationId: 'listAgents', summary: 'List agents, newest first', tags, querystring: ListAgentsQuery, response: { 200: AgentList, ...authErrors } },
    handler: async (request) => agents.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/agents/:id', {
    config: { scope: 'workflows:read' },
    schema: { operationId: 'getAgent', summary: 'Get an agent with its spec', tags, params: AgtId, response: { 200: Agent, ...authErrors, 404: notFound } },
    handler: async (request) => agents.get(authOf(request).workspaceId, request.params.id),
  });

  app.post('/api/v1/agents', {
    config: { scope: 'workflows:write' },
    schema: { operationId: 'createAgent', summary: 'Create a draft agent from spec fields (name required)', tags, body: CreateAgentBody, response: { 201: Agent, ...authErrors, 404: credentialNotFound } },
    handler: async (request, reply) => reply.code(201).send(await agents.create(authOf(request).workspaceId, request.body)),
  });

  app.post('/api/v1/agents/from-spec', {
    config: { scope: 'workflows:write' },
    schema: { operationId: 'createAgentFromSpec', summary: 'Create a draft agent from a whole spec document', tags, body: FromSpecBody, response: { 201: Agent, ...authErrors, 404: credentialNotFound } },
    handler: async (request, reply) => reply.code(201).send(await agents.create(authOf(request).workspaceId, request.body.spec)),
  });

  app.post('/api/v1/agents/generate', {
    config: { scope: 'workflows:write' },
    schema: {
      operationId: 'generateAgent',
      summary: 'Draft an agent from a plain-language description through the LLM',
      tags,
      body: GenerateAgentBody,
      response: {
        201: Agent,
        ...authErrors,
        422: ErrorBody.meta({ description: 'generation_failed' }),
        502: ErrorBody.meta({ description: 'llm_unavailable' }),
        503: ErrorBody.meta({ description: 'llm_not_configured: no LLM_BASE_URL' }),
      },
    },
    handler: async (request, reply) => reply.code(201).send(await agents.generate(authOf(request).workspaceId, request.body.description)),
  });

  app.patch('/api/v1/agents/:id', {
    config: { scope: 'workflows:write' },
    schema: {
      operationId: 'updateAgent',
      summary: 'Replace top-level spec fields',
      description: 'A published agent is re-checked as publish checks it, including the claim of its msgapp number (409 number_in_use, 422 number_not_owned, 502 provider_error).',
      tags,
      params: AgtId,
      body: PatchAgentBody,
      response: {
        200: Agent,
        ...authErrors,
        404: agentNotFound,
        ...numberClaimErrors,
      },
    },
    handler: async (request) => agents.update(authOf(request).workspaceId, request.params.id, request.body as Record<string, unknown>),
  });

  app.post('/api/v1/agents/:id/publish', {
    config: { scope: 'workflows:publish' },
    schema: {
      operationId: 'publishAgent',
      summary: 'Publish: the agent goes live; what would stop it running is recorded in invalid_reasons',
      description:
        "A msgapp `phone_number_id` belongs to at most one published, runnable agent in the whole installation. Before a runnable agent claims one, the provider is asked with the agent's own credential (`GET /{phone-number-id}`) whether that token owns the number. An agent that cannot run (non-empty `invalid_reasons`) claims no number and receives nothing on it.",
      tags,
      params: AgtId,
      response: {
        200: Agent,
        ...authErrors,
        404: notFound,
        ...numberClaimErrors,
      },
    },
    handler: async (request) => agents.publish(authOf(request).workspaceId, request.params.id),
  });
};
