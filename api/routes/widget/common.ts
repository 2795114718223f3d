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

/**
 * How a caller proves a verified identity on an endpoint whose contract has no
 * `user_context` (GET history, tasks, upload status): `external_id` and `user_hash` as
 * query fields, as GET /conversations takes them. Needed only for a conversation a
 * verified visitor started.
 */
export const IdentityQuery = {
  external_id: z.string().min(1).max(200).optional().meta({ description: 'With user_hash: required for a conversation started by a verified visitor' }),
  user_hash: z.string().max(200).optional().meta({ description: 'HMAC-SHA256 of `<site_id>.<external_id>` keyed with the site secret' }),
};

/** The user_context of a request that carries the identity as flat fields. */
export const identityOf = (q: { external_id?: string; user_hash?: string }): { external_id?: string; user_hash?: string } | undefined =>
  q.external_id || q.user_hash ? { external_id: q.external_id, user_hash: q.user_hash } : undefined;

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

/** The refusals of a request that names a conversation (added to `widgetErrors`). */
export const conversationErrors = {
  403: ErrorBody.meta({
    description:
      'site_suspended, origin_not_allowed, identity_verification_required (the conversation was started by a verified visitor and no user_hash was sent), identity_verification_failed, forbidden (another visitor\'s conversation)',
  }),
  404: ErrorBody.meta({ description: 'unknown_site, not_found (no such conversation on this site)' }),
} as const;
