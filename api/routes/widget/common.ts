import { z } from 'zod';
import { ErrorBody } from '../../schemas/common';

/** Schemas and error documentation shared by the widget routes. */
export const UserContext = z
  .object({
    external_id: z.string().min(1).max(200).optional(),
    user_hash: z.string().max(200).optional(),
    phone: z.string().max(32).optional(),
    email: z.string().max(320).optional(),
  })
  .strict();

export const tags = ['Widget'];
export const widgetErrors = {
  400: ErrorBody.meta({ description: 'missing_site_id, invalid_request' }),
  403: ErrorBody.meta({ description: 'site_suspended, origin_not_allowed, identity_verification_required, identity_verification_failed' }),
  404: ErrorBody.meta({ description: 'unknown_site' }),
  429: ErrorBody.meta({
    description:
      'rate_limited (Retry-After): more than 300 requests a minute from one client address to the site, or more than 30 refused requests (unknown site, Origin not allowed, suspended site) a minute from one address (then answered before any lookup)',
  }),
  503: ErrorBody.meta({ description: 'no_workflow_configured: the site is not bound to a published agent' }),
} as const;
