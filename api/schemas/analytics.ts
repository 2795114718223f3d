import { z } from 'zod';
import { WindowBound as Bound } from './common';

/** The canonical IANA zone names, UTC first. */
const TIME_ZONES = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC')];

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
