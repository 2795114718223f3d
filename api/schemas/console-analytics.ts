import { z } from 'zod';

const Seconds = (what: string) => z.number().min(0).nullable().meta({ description: `${what}, in seconds (to the millisecond); null when no conversation counts` });

/** People's wait and handle times over the conversations started in a window (domain/analytics/analytics.ts `handling`). */
export const HandlingTimes = z
  .object({
    from: z.string(),
    to: z.string(),
    handled_conversations: z.number().int().min(0).meta({ description: 'Conversations started in the window that a person took (taken, assigned or passed on at least once)' }),
    median_wait_seconds: Seconds('Per conversation a person took, its time in the queue before a person took it (summed over its stays in the queue), the median'),
    p90_wait_seconds: Seconds('The same waits, the 90th percentile'),
    median_handle_seconds: Seconds('Per conversation a person took and nobody holds now, the time people held it (summed), the median'),
    p90_handle_seconds: Seconds('The same handle times, the 90th percentile'),
  })
  .meta({ id: 'HandlingTimes' });
