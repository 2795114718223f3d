import { z } from 'zod';
import { USAGE_CURSOR } from '../../domain/billing/credits';
import { WindowBound } from './common';

export const Credits = z
  .object({
    balance: z.number().int().meta({ description: 'Credits left; only voice spends them' }),
    granted: z.number().int(),
    used: z.number().int(),
    updated_at: z.string().nullable(),
  })
  .meta({ id: 'Credits' });

export const UsageQuery = z.object({
  from: WindowBound.optional().meta({ description: 'Start (inclusive); default `to` minus 30 days; before `to` (else 400 invalid_request)' }),
  to: WindowBound.optional().meta({ description: 'End (exclusive); default now' }),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z
    .string()
    .max(500)
    .regex(USAGE_CURSOR)
    .optional()
    .meta({ description: 'The `next_cursor` of the previous page: `<UTC day>.<kind, base64url>`; any value of that form is a position', example: '2026-11-20.bXNnYXBwX21lc3NhZ2U' }),
});

export const UsageList = z
  .object({
    usage: z.array(
      z.object({
        day: z.string().meta({ description: 'UTC day, YYYY-MM-DD' }),
        kind: z.string().meta({ description: 'msgapp_message, structured_extraction, llm_tokens, voice_credits' }),
        quantity: z.number(),
        unit: z.string(),
        unit_price: z.number(),
        amount: z.number(),
        currency: z.string().meta({ description: 'BILLING_CURRENCY, or `credits` for what credits paid' }),
      }),
    ),
    next_cursor: z.string().nullable(),
  })
  .meta({ id: 'UsageList' });
