import { z } from 'zod';

export const ErrorBody = z
  .object({
    error: z.string().meta({ description: 'Machine-readable error code' }),
    message: z.string().meta({ description: 'Human-readable explanation; names the offending field for validation errors' }),
  })
  .catchall(z.unknown())
  .meta({ id: 'Error', description: 'Every error response: `{error, message}` plus documented extra fields.' });

/** Error responses every authenticated operation can give. */
export const authErrors = {
  400: ErrorBody.meta({ description: 'invalid_request: body, query or a header failed validation' }),
  401: ErrorBody.meta({ description: 'invalid_api_key or revoked_api_key' }),
  403: ErrorBody.meta({ description: 'insufficient_scope' }),
  429: ErrorBody.meta({ description: 'rate_limited; see Retry-After and X-RateLimit-* headers' }),
} as const;

export const IdParam = z.object({ id: z.string().min(1).max(100) });
