/**
 * The domain's one error type: what went wrong, in the contract's words (`code`), with a
 * message and the details a caller needs. It carries no HTTP status: the API maps each
 * code to its status in one table (api/http-errors.ts), the CLI prints code and message.
 *
 * It lives in lib/ rather than domain/ because lib/ (the rate limiters) and db/ (paging)
 * refuse requests too, and lib/ imports nothing from domain/; domain/errors.ts re-exports it.
 */

/**
 * Every code the domain raises. Mostly the contract's own error codes; a code that names
 * a different situation from one already here, but answers with the same wire code, is its
 * own entry (the API's table says which wire code and status it becomes).
 */
export type DomainErrorCode =
  // The request itself is wrong.
  | 'invalid_request'
  | 'bad_schema'
  | 'missing_schema'
  | 'missing_site_id'
  | 'invalid_phone_number'
  | 'invalid_url'
  | 'not_audio'
  | 'too_many_files'
  | 'unsupported_type'
  | 'unsupported_mime'
  | 'media_too_long'
  /** A console password that is too short, too common or too repetitive. */
  | 'weak_password'
  // Not who they say (the console's sign-in and session).
  | 'invalid_credentials'
  | 'not_signed_in'
  /** The password was right; the account has a second factor: send totp_code. */
  | 'second_factor_required'
  | 'invalid_totp_code'
  /** The workspace requires a second factor the account does not have yet: enrol (the secret is in the answer). */
  | 'totp_enrolment_required'
  | 'totp_already_enrolled'
  // Not allowed.
  /** An unsafe console request without the session's CSRF token, or from another origin. */
  | 'csrf_failed'
  | 'out_of_credits'
  | 'forbidden'
  | 'insufficient_scope'
  | 'dial_out_not_enabled'
  | 'voice_chat_not_enabled'
  | 'file_upload_not_enabled'
  | 'identity_verification_failed'
  | 'identity_verification_required'
  | 'origin_not_allowed'
  | 'site_suspended'
  // Not there (any more).
  | 'not_found'
  | 'credential_not_found'
  | 'folder_not_found'
  | 'parent_not_found'
  | 'unknown_site'
  | 'content_gone'
  /** A one-time link (sign-in, invitation, password reset) that was never issued. */
  | 'link_not_found'
  /** A one-time link already used or past its expiry. */
  | 'link_expired'
  // The state forbids it.
  | 'conversation_closed'
  | 'delivery_in_progress'
  | 'delivery_not_retrying'
  | 'file_exists'
  | 'folder_exists'
  | 'folder_not_empty'
  | 'identity_in_use'
  | 'key_revoked'
  | 'number_in_use'
  | 'task_in_progress'
  | 'ticket_closed'
  // The console's inbox (issue 31): someone else holds the conversation; nobody does; a canned reply's title is taken.
  | 'already_assigned'
  | 'not_handed_off'
  | 'not_held'
  | 'canned_reply_exists'
  | 'upload_cancelled'
  /** A sent message the agent is still answering (a repeated sync send whose reply is not stored yet). */
  | 'message_in_progress'
  | 'voice_session_not_live'
  /** The workspace's last owner cannot be removed or demoted. */
  | 'last_owner'
  | 'email_taken'
  /** A key made before keys were sealed for copy: rotate it first. */
  | 'key_not_copyable'
  /** The email and password match users of several workspaces: name one. */
  | 'workspace_required'
  /** An email domain another workspace's SSO already serves. */
  | 'sso_domain_taken'
  // Understood, but cannot be done with what is stored or given.
  | 'agent_not_published'
  | 'ambiguous_sender'
  | 'business_account_required'
  | 'empty_transcript'
  | 'extraction_failed'
  | 'generation_failed'
  | 'number_not_owned'
  | 'provider_refused'
  | 'sender_agent_invalid'
  | 'sender_not_authorized'
  | 'session_window_closed'
  | 'template_not_approved'
  /** A stored address that broke the address rules when it was about to be called (wire code invalid_url). */
  | 'stored_url_unsafe'
  // Too much, too often.
  | 'rate_limited'
  | 'concurrent_voice_limit_reached'
  // Ours, or a dependency's.
  | 'internal_error'
  | 'not_implemented'
  | 'llm_unavailable'
  | 'provider_error'
  | 'dial_out_prereq_failed'
  | 'voice_chat_prereq_failed'
  | 'embeddings_unavailable'
  | 'file_upload_prereq_failed'
  | 'llm_not_configured'
  | 'missing_credential'
  | 'model_unavailable'
  | 'no_workflow_configured'
  | 'provider_unavailable'
  | 'workflow_unavailable'
  /** Outbound messaging needs a msgapp provider and a workflow service, and this process lacks one. */
  | 'messaging_unavailable'
  /** The agent's turn failed: the conversation's actor answered a sync send with an error. */
  | 'workflow_execution_failed'
  | 'extraction_timeout';

/** What a refusal says about when to try again, beyond its message. */
export interface RetryHint {
  /** Seconds until the same request may succeed (the API sends it as Retry-After). */
  retryAfterSeconds?: number;
}

export class DomainError extends Error {
  readonly retryAfterSeconds?: number;

  constructor(
    readonly code: DomainErrorCode,
    message: string,
    /** Fields the caller gets beside code and message (the API's body spreads them). */
    readonly details: Record<string, unknown> = {},
    hint: RetryHint = {},
  ) {
    super(message);
    this.name = 'DomainError';
    if (hint.retryAfterSeconds !== undefined) this.retryAfterSeconds = hint.retryAfterSeconds;
  }
}

export const notFound = (what: string, id: string) => new DomainError('not_found', `No ${what} with id '${id}' in this workspace`);
export const invalidRequest = (message: string) => new DomainError('invalid_request', message);
