import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { windowOf } from '../../domain/analytics/analytics';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { AnalyticsSummary, AnalyticsWindowQuery, ChannelBreakdown, ConversationsOverTime, FeedbackList, FeedbackListQuery, OverTimeQuery } from '../schemas/analytics';
import { authErrors, ErrorBody } from '../schemas/common';

const tags = ['Analytics'];
const badWindow = ErrorBody.meta({ description: 'invalid_request: a bad from/to, interval or tz, or too many buckets' });

/** Workspace analytics (scope analytics:read): computed from the rows, no sampling. */
export const analyticsRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'analytics' | 'feedback'> }> = async (app, opts) => {
  const analytics = opts.services.analytics;

  app.get('/api/v1/analytics/summary', {
    config: { scope: 'analytics:read' },
    schema: { operationId: 'getAnalyticsSummary', summary: 'Conversations, messages, handoffs, resolution, first-reply time and widget feedback for a window', tags, querystring: AnalyticsWindowQuery, response: { 200: AnalyticsSummary, ...authErrors, 400: badWindow } },
    handler: async (request) => analytics.summary(authOf(request).workspaceId, windowOf(request.query)),
  });

  app.get('/api/v1/analytics/conversations-over-time', {
    config: { scope: 'analytics:read' },
    schema: { operationId: 'getConversationsOverTime', summary: 'Conversations started per hour, day or week, in a time zone', tags, querystring: OverTimeQuery, response: { 200: ConversationsOverTime, ...authErrors, 400: badWindow } },
    handler: async (request) => analytics.conversationsOverTime(authOf(request).workspaceId, windowOf(request.query), request.query.interval, request.query.tz),
  });

  app.get('/api/v1/analytics/channel-breakdown', {
    config: { scope: 'analytics:read' },
    schema: { operationId: 'getChannelBreakdown', summary: 'Conversations and messages per channel (msgapp, web, voice)', tags, querystring: AnalyticsWindowQuery, response: { 200: ChannelBreakdown, ...authErrors, 400: badWindow } },
    handler: async (request) => analytics.channelBreakdown(authOf(request).workspaceId, windowOf(request.query)),
  });

  app.get('/api/v1/analytics/feedback', {
    config: { scope: 'analytics:read' },
    schema: {
      operationId: 'listFeedback',
      summary: "Widget visitors' thumbs on agent replies and ratings of conversations, newest first",
      description:
        'One row per reply judged and per conversation rated, as it stands now (a visitor who sends again replaces their feedback; one who clears it removes the row). Ordered by when it was first given; `since`/`until` filter on that too.',
      tags,
      querystring: FeedbackListQuery,
      response: { 200: FeedbackList, ...authErrors },
    },
    handler: async (request) => opts.services.feedback.list(authOf(request).workspaceId, request.query),
  });
};
