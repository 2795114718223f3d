import { z } from 'zod';
import { Cursor, TimestampBound, WindowBound as Bound } from './common';

/** The canonical IANA zone names, UTC first. */
export const TIME_ZONES = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC')];

/** `from` before `to`, at most 400 days apart (400 invalid_request otherwise): rules between two values, which a schema cannot state. */
const WindowQuery = {
  from: Bound.optional().meta({ description: 'Start of the window (inclusive); default `to` minus 30 days; before `to`, at most 400 days earlier' }),
  to: Bound.optional().meta({ description: 'End of the window (exclusive); default now' }),
};

export const AnalyticsWindowQuery = z.object(WindowQuery);
export const OverTimeQuery = z
  .object({
    ...WindowQuery,
    interval: z.enum(['hour', 'day', 'week']).default('day'),
    tz: z
      .string()
      .min(1)
      .max(64)
      .default('UTC')
      // The document lists the zones (as this Node.js knows them, every one of which PostgreSQL knows too); the server
      // asks PostgreSQL, which also takes the old aliases (`US/Eastern`), so those still work.
      .meta({ enum: TIME_ZONES, description: 'IANA time zone the buckets follow (days start at its midnight; weeks on Monday); aliases such as US/Eastern are accepted too' }),
  });

const Rate = z.number().min(0).max(1).nullable();

export const AnalyticsSummary = z
  .object({
    from: z.string(),
    to: z.string(),
    conversations: z.number().int().meta({ description: 'Conversations started in the window' }),
    messages_in: z.number().int().meta({ description: "Customers' messages in the window (every channel)" }),
    messages_out: z.number().int().meta({ description: "The agent's and human agents' replies in the window" }),
    handoffs: z.number().int().meta({ description: 'Conversations of the window handed to a human' }),
    handoff_rate: Rate,
    resolved_without_handoff: z.number().int().meta({ description: 'Conversations of the window the agent answered and never handed over' }),
    resolution_rate: Rate,
    median_first_reply_seconds: z.number().nullable().meta({ description: "From a conversation's first customer message to the first reply, the median; null when none" }),
    feedback: z
      .object({
        up: z.number().int().meta({ description: 'Agent replies a widget visitor gave a thumbs up' }),
        down: z.number().int().meta({ description: 'Agent replies a widget visitor gave a thumbs down' }),
        ratings: z.number().int().meta({ description: 'Conversations a widget visitor rated (1 to 5)' }),
        average_rating: z.number().min(1).max(5).nullable().meta({ description: 'The mean of those ratings, to two decimals; null when none' }),
      })
      .meta({ description: 'Widget feedback first given in the window, as it stands now (a replaced thumb counts once, as its latest value; a cleared one not at all)' }),
  })
  .meta({ id: 'AnalyticsSummary' });

export const ConversationsOverTime = z
  .object({
    from: z.string(),
    to: z.string(),
    interval: z.enum(['hour', 'day', 'week']),
    tz: z.string(),
    buckets: z.array(z.object({ start: z.string().meta({ description: "The bucket's start, ISO 8601 with the zone's offset" }), conversations: z.number().int() })),
  })
  .meta({ id: 'ConversationsOverTime' });

export const ChannelBreakdown = z
  .object({
    from: z.string(),
    to: z.string(),
    channels: z.array(z.object({ channel: z.enum(['msgapp', 'web', 'voice']), conversations: z.number().int(), messages: z.number().int() })),
  })
  .meta({ id: 'ChannelBreakdown' });

/** A widget visitor's thumb on an agent reply (`kind: reply`) or rating of a conversation (`kind: conversation`). */
export const Feedback = z
  .object({
    id: z.string(),
    kind: z.enum(['reply', 'conversation']),
    conversation_id: z.string(),
    reply_id: z.string().nullable().meta({ description: 'The agent reply judged (its message id); null for a conversation rating' }),
    site_id: z.string(),
    agent_id: z.string().nullable().meta({ description: "The site's agent when the feedback was given; null once that agent is deleted" }),
    rating: z.enum(['up', 'down']).nullable().meta({ description: 'kind reply: the thumb; null for a conversation rating' }),
    score: z.number().int().min(1).max(5).nullable().meta({ description: 'kind conversation: 1 (worst) to 5 (best); null for a reply thumb' }),
    comment: z.string().nullable().meta({ description: "The visitor's words (at most 1,000 characters, plain text: never render it as markup)" }),
    created_at: z.string().meta({ format: 'date-time', description: 'When it was first given (the list order and the time filters)' }),
    updated_at: z.string().meta({ format: 'date-time', description: 'When it was last replaced' }),
  })
  .meta({ id: 'Feedback' });

export const FeedbackList = z.object({ feedback: z.array(Feedback), next_cursor: z.string().nullable() }).meta({ id: 'FeedbackList' });

const FilterId = z.string().min(1).max(100);

export const FeedbackListQuery = z.object({
  kind: z.enum(['reply', 'conversation']).optional(),
  rating: z.enum(['up', 'down']).optional().meta({ description: 'Only reply thumbs with this value' }),
  score: z.coerce.number().int().min(1).max(5).optional().meta({ description: 'Only conversation ratings with this score' }),
  // Filters, not references: an id of no such thing matches nothing (no pattern to refuse by).
  agent_id: FilterId.optional().meta({ description: 'Only feedback on this agent (agt_…)' }),
  site_id: FilterId.optional().meta({ description: 'Only feedback from this site (site_…)' }),
  conversation_id: FilterId.optional().meta({ description: 'Only feedback on this conversation (conv_…)' }),
  since: TimestampBound.optional().meta({ description: 'Given at or after (inclusive)' }),
  until: TimestampBound.optional().meta({ description: 'Given before (exclusive)' }),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});
