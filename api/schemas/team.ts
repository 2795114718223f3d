import { z } from 'zod';
import { AWAY_MESSAGE_MAX, CLOSE_PATTERN, DAYS, MAX_INTERVALS, OPEN_PATTERN, REPLY_TIME_MAX_MINUTES } from '../../domain/team/availability';
import { TIME_ZONES } from './analytics';

const TimeZone = z
  .string()
  .min(1)
  .max(64)
  // Listed like conversations-over-time's `tz`; the server asks the runtime, which also takes aliases such as US/Eastern.
  .meta({ enum: TIME_ZONES, description: 'IANA time zone the hours are read in; aliases such as US/Eastern are accepted too', example: 'Europe/Paris' });

const Interval = z
  .object({
    day: z.enum(DAYS),
    open: z.string().regex(OPEN_PATTERN).meta({ description: 'Opening time, HH:MM (24-hour) wall-clock time in `timezone`', example: '09:00' }),
    close: z
      .string()
      .regex(CLOSE_PATTERN)
      .meta({ description: 'Closing time (exclusive), HH:MM; 24:00 is midnight; earlier than `open`: the interval runs past midnight into the next day', example: '17:30' }),
  })
  .strict()
  .meta({ id: 'OpeningInterval' });

const Hours = z
  .array(Interval)
  .max(MAX_INTERVALS)
  .meta({ description: 'Weekly openings; empty: always open. An interval may not be empty (open = close) nor overlap another (400 invalid_request naming them)' });
const AwayMessage = z.string().max(AWAY_MESSAGE_MAX).nullable().meta({ description: 'Shown to visitors while away (trimmed; empty or null: none)' });
const ReplyTime = z.number().int().min(1).max(REPLY_TIME_MAX_MINUTES).nullable().meta({ description: "The team's typical first reply, in minutes; null: not said" });

export const TeamAvailability = z
  .object({
    timezone: z.string(),
    hours: z.array(Interval),
    away: z.boolean().meta({ description: 'Nobody answers, whatever the hours say' }),
    away_message: z.string().nullable(),
    reply_time_minutes: z.number().int().nullable(),
    available: z.boolean().meta({ description: 'Whether someone of the team is available now (not away, and within the hours)' }),
    next_available_at: z
      .string()
      .nullable()
      .meta({ description: 'When nobody is available now: the next opening (ISO 8601, UTC); null when available now, when away, or when no opening comes within a week' }),
    updated_at: z.string().nullable().meta({ description: 'The last change; null: never set (the defaults)' }),
  })
  .meta({ id: 'TeamAvailability' });

export const PutTeamAvailabilityBody = z
  .object({
    timezone: TimeZone.optional(),
    hours: Hours.optional(),
    away: z.boolean().optional(),
    away_message: AwayMessage.optional(),
    reply_time_minutes: ReplyTime.optional(),
  })
  .strict()
  .meta({ description: 'The fields to set; a field left out keeps its value' });
