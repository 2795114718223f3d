import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { authErrors } from '../schemas/common';
import { PutTeamAvailabilityBody, TeamAvailability } from '../schemas/team';

const tags = ['Team'];

/** The team's availability: business hours and the away switch, which the widget tells visitors a person holds. */
export const teamRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'team'> }> = async (app, opts) => {
  const team = opts.services.team;

  app.get('/api/v1/team/availability', {
    config: { scope: 'conversations:read' },
    schema: {
      operationId: 'getTeamAvailability',
      summary: "The team's business hours and away switch, with whether someone is available now and the next opening",
      tags,
      response: { 200: TeamAvailability, ...authErrors },
    },
    handler: async (request) => team.availability(authOf(request).workspaceId),
  });

  app.put('/api/v1/team/availability', {
    config: { scope: 'conversations:write' },
    schema: {
      operationId: 'setTeamAvailability',
      summary: 'Set business hours, time zone, the away switch and message, or the typical reply time (fields left out keep their value)',
      tags,
      body: PutTeamAvailabilityBody,
      response: { 200: TeamAvailability, ...authErrors },
    },
    handler: async (request) => team.setAvailability(authOf(request).workspaceId, request.body),
  });
};
