import { z } from 'zod';

export const Credits = z
  .object({
    balance: z.number().int().meta({ description: 'Credits left; only voice spends them' }),
    granted: z.number().int(),
    used: z.number().int(),
    updated_at: z.string().nullable(),
  })
  .meta({ id: 'Credits' });

export const UsageQuery = z.object({
  from: z.string().optional().meta({ description: 'Start (ISO 8601, inclusive); default `to` minus 30 days' }),
  to: z.string().optional().meta({ description: 'End (ISO 8601, exclusive); default now' }),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(500).optional().meta({ description: 'The `next_cursor` of the previous page' }),
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
