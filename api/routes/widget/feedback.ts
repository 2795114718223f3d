import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { FEEDBACK_COMMENT_MAX } from '../../../domain/widget/feedback';
import { ErrorBody } from '../../schemas/common';
import { UserContext, conversationErrors, tags, widgetErrors } from './common';

const Comment = z
  .string()
  .max(FEEDBACK_COMMENT_MAX)
  .nullable()
  .optional()
  .meta({ description: `The visitor's words, plain text (at most ${FEEDBACK_COMMENT_MAX} characters; trimmed, blank is none). Replaced with the rest: absent clears it.` });

const FeedbackBody = z
  .object({
    conversation_id: z.string().min(1).max(100),
    reply_id: z.string().min(1).max(100).meta({ description: "The agent reply judged: the `reply` frame's `reply_id`, /history's `id` of an assistant message (not a human agent's)" }),
    rating: z.enum(['up', 'down']).nullable().meta({ description: 'null clears the feedback on this reply' }),
    comment: Comment,
    user_context: UserContext.optional(),
  })
  .strict();
const ReplyFeedback = z
  .object({
    conversation_id: z.string(),
    reply_id: z.string(),
    rating: z.enum(['up', 'down']).nullable(),
    comment: z.string().nullable(),
    updated_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'WidgetReplyFeedback' });

const RatingBody = z
  .object({
    conversation_id: z.string().min(1).max(100),
    score: z.number().int().min(1).max(5).nullable().meta({ description: '1 (worst) to 5 (best); null clears the rating' }),
    comment: Comment,
    user_context: UserContext.optional(),
  })
  .strict();
const ConversationRating = z
  .object({
    conversation_id: z.string(),
    score: z.number().int().min(1).max(5).nullable(),
    comment: z.string().nullable(),
    updated_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'WidgetConversationRating' });

const noReply = {
  404: ErrorBody.meta({ description: 'unknown_site, not_found (no such conversation on this site, or no reply of the agent with that id in it)' }),
} as const;

/**
 * The visitor's feedback: a thumb on an agent reply, a 1-to-5 rating of the conversation.
 * One of each per subject, replaced by the next one sent (201 the first time, 200 after);
 * allowed on a closed conversation too (the rating is often given at the end).
 */
export const feedbackRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'widgetChat'> }> = async (app, opts) => {
  app.post('/api/public/widget/feedback', {
    config: { site: true },
    schema: {
      operationId: 'widgetFeedback',
      summary: 'Thumbs up or down on an agent reply (sending again replaces it; rating null clears it)',
      description: '201 for the first feedback on the reply, 200 when it replaced or cleared one.',
      tags,
      security: [{ widgetSite: [] }],
      body: FeedbackBody,
      response: {
        200: ReplyFeedback,
        201: ReplyFeedback,
        ...widgetErrors,
        ...conversationErrors,
        ...noReply,
      },
    },
    handler: async (request, reply) => {
      const { created, feedback } = await opts.services.widgetChat.rateReply(request.site!, request.body);
      return reply.code(created ? 201 : 200).send(feedback);
    },
  });

  app.post('/api/public/widget/rating', {
    config: { site: true },
    schema: {
      operationId: 'widgetRating',
      summary: 'Rate the conversation from 1 to 5 (sending again replaces it; score null clears it)',
      description: '201 for the first rating of the conversation, 200 when it replaced or cleared one. A closed conversation may be rated.',
      tags,
      security: [{ widgetSite: [] }],
      body: RatingBody,
      response: {
        200: ConversationRating,
        201: ConversationRating,
        ...widgetErrors,
        ...conversationErrors,
      },
    },
    handler: async (request, reply) => {
      const { created, rating } = await opts.services.widgetChat.rateConversation(request.site!, request.body);
      return reply.code(created ? 201 : 200).send(rating);
    },
  });
};
