import { DomainError, type DomainErrorCode } from '../lib/errors';

/**
 * An error as the API answers it: status, the contract's envelope (docs/contract.md) `{error, message, ...extra}`
 * and any headers. The API's own refusals (auth, input, idempotency, methods, routes) throw
 * it directly; a DomainError becomes one through DOMAIN_ERRORS below.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  body(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra };
  }
}

/** A status, or a status and the wire code when the domain's code is not the contract's own. */
type HttpAnswer = number | { status: number; error: string };

/**
 * Every domain error code and how the API answers it: the one table from the domain's
 * words to the contract's statuses. A Record, so a new code without an answer does not compile.
 */
export const DOMAIN_ERRORS: Record<DomainErrorCode, HttpAnswer> = {
  invalid_request: 400,
  bad_schema: 400,
  missing_schema: 400,
  missing_site_id: 400,
  invalid_phone_number: 400,
  invalid_url: 400,
  not_audio: 400,
  too_many_files: 400,
  unsupported_type: 400,
  unsupported_mime: 415,
  media_too_long: 413,
  weak_password: 400,

  invalid_credentials: 401,
  not_signed_in: 401,
  second_factor_required: 401,
  invalid_totp_code: 401,
  totp_enrolment_required: 403,

  out_of_credits: 402,
  forbidden: 403,
  insufficient_scope: 403,
  dial_out_not_enabled: 403,
  voice_chat_not_enabled: 403,
  file_upload_not_enabled: 403,
  identity_verification_failed: 403,
  identity_verification_required: 403,
  origin_not_allowed: 403,
  site_suspended: 403,
  csrf_failed: 403,

  not_found: 404,
  credential_not_found: 404,
  folder_not_found: 404,
  parent_not_found: 404,
  unknown_site: 404,
  content_gone: 410,
  link_not_found: 404,
  link_expired: 410,

  conversation_closed: 409,
  delivery_in_progress: 409,
  delivery_not_retrying: 409,
  file_exists: 409,
  folder_exists: 409,
  folder_not_empty: 409,
  identity_in_use: 409,
  key_revoked: 409,
  number_in_use: 409,
  task_in_progress: 409,
  ticket_closed: 409,
  already_assigned: 409,
  not_handed_off: 409,
  not_held: 409,
  canned_reply_exists: 409,
  upload_cancelled: 409,
  message_in_progress: 409,
  voice_session_not_live: 409,
  last_owner: 409,
  email_taken: 409,
  key_not_copyable: 409,
  workspace_required: 409,
  sso_domain_taken: 409,
  totp_already_enrolled: 409,

  agent_not_published: 422,
  ambiguous_sender: 422,
  business_account_required: 422,
  empty_transcript: 422,
  extraction_failed: 422,
  generation_failed: 422,
  number_not_owned: 422,
  provider_refused: 422,
  sender_agent_invalid: 422,
  sender_not_authorized: 422,
  session_window_closed: 422,
  template_not_approved: 422,
  // The request was fine; what is stored is not (any more): 422, not the 400 of registration.
  stored_url_unsafe: { status: 422, error: 'invalid_url' },

  rate_limited: 429,
  concurrent_voice_limit_reached: 429,

  internal_error: 500,
  not_implemented: 501,
  llm_unavailable: 502,
  provider_error: 502,
  dial_out_prereq_failed: 503,
  voice_chat_prereq_failed: 503,
  embeddings_unavailable: 503,
  file_upload_prereq_failed: 503,
  llm_not_configured: 503,
  missing_credential: 503,
  model_unavailable: 503,
  no_workflow_configured: 503,
  provider_unavailable: 503,
  workflow_unavailable: 503,
  messaging_unavailable: 503,
  workflow_execution_failed: 502,
  extraction_timeout: 504,
};

/** The status and wire code a domain error code answers with. */
export function httpAnswerOf(code: DomainErrorCode): { status: number; error: string } {
  const answer = DOMAIN_ERRORS[code];
  return typeof answer === 'number' ? { status: answer, error: code } : answer;
}

/** A domain error as the API answers it; its retry hint becomes Retry-After. */
export function fromDomainError(err: DomainError): ApiError {
  const { status, error } = httpAnswerOf(err.code);
  const headers: Record<string, string> = err.retryAfterSeconds !== undefined ? { 'Retry-After': String(err.retryAfterSeconds) } : {};
  const apiError = new ApiError(status, error, err.message, err.details, headers);
  apiError.stack = err.stack;
  return apiError;
}

/** Any error as an ApiError when it is one or a domain error; anything else is returned as it is. */
export function asApiError(err: unknown): unknown {
  return err instanceof DomainError ? fromDomainError(err) : err;
}
