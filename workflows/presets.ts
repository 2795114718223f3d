import type { ActivityOptions } from '@temporalio/workflow';

/** Activity options named by intent, so workflows never repeat timeouts inline. */
export const presets = {
  /** Short database housekeeping: retried a few times, never for long. */
  maintenance: {
    startToCloseTimeout: '2 minutes',
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 5 },
  },
} satisfies Record<string, ActivityOptions>;
