import { z } from 'zod';
import { ACTOR_TYPES, CONSOLE_ROLES, LINK_KINDS } from '../../db/entities';
import { ALL_SCOPES } from '../../domain/keys/scopes';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../domain/people/passwords';
import { Cursor, ErrorBody, idString } from './common';

const Timestamp = z.string().meta({ format: 'date-time' });
const Role = z.enum(CONSOLE_ROLES).meta({ id: 'ConsoleRole', description: 'owner and admin: every scope (only an owner manages owners); agent: conversations:*, customers:*, kb:read, workflows:read; viewer: every :read scope' });
const Email = z.string().min(3).max(254).meta({ format: 'email', example: 'ada@example.com' });
/** A link or session token as issued: 43 base64url characters (any other string is simply not found). */
const Token = z.string().min(1).max(200).meta({ pattern: '^[A-Za-z0-9_-]{43}$', example: 'x3Jq0m2Vw9mJ8Rk1b4Yp7Qe6Ls5Nd0Tf2Ha9Uc8Ze1o' });
const NewPassword = z
  .string()
  .min(MIN_PASSWORD_LENGTH)
  .max(MAX_PASSWORD_LENGTH)
  .meta({ description: `At least ${MIN_PASSWORD_LENGTH} characters, not one of the most common passwords, not the email address (400 weak_password)` });

export const ConsoleUser = z
  .object({
    id: z.string().meta({ example: 'usr_0a1b2c3d4e5f60718293a4b5' }),
    email: z.string(),
    name: z.string().nullable(),
    role: Role,
    status: z.enum(['invited', 'active']).meta({ description: 'invited: has not set a password yet; active: signs in' }),
    created_at: Timestamp,
    last_sign_in_at: Timestamp.nullable(),
  })
  .meta({ id: 'ConsoleUser' });

export const ConsoleUserList = z.object({ users: z.array(ConsoleUser) }).meta({ id: 'ConsoleUserList' });

export const ConsoleSession = z
  .object({
    user: ConsoleUser,
    workspace: z.object({ id: z.string(), name: z.string() }),
    scopes: z.array(z.string()).meta({ description: "The role's scopes: the /api/v1 operations this session may call" }),
    csrf_token: z.string().meta({ description: 'Send it as X-CSRF-Token on every POST, PUT, PATCH and DELETE made with this session' }),
    expires_at: Timestamp.meta({ description: 'The absolute end of the session' }),
    idle_expires_at: Timestamp.meta({ description: 'When the session ends if no request is made before' }),
  })
  .meta({ id: 'ConsoleSession', description: 'The signed-in user, their workspace and the session (the cookie itself is HttpOnly)' });

export const SignInBody = z.object({
  email: Email,
  password: z.string().min(1).max(MAX_PASSWORD_LENGTH),
  workspace_id: idString('ws').optional().meta({ description: 'Needed only when the email and password open several workspaces (409 workspace_required)' }),
  totp_code: z.string().min(6).max(16).optional().meta({ description: 'The authenticator app’s code, when the account has a second factor (401 second_factor_required) or is enrolling one (403 totp_enrolment_required)', example: '123456' }),
});

export const PasswordResetBody = z.object({ email: Email });
export const Accepted = z.object({ accepted: z.literal(true) }).meta({ id: 'Accepted' });

export const LinkTokenBody = z.object({ token: Token });
export const RedeemLinkBody = z.object({
  token: Token,
  password: NewPassword,
  name: z.string().min(1).max(200).optional().meta({ description: "The user's name (an invitation may set it)" }),
  totp_code: z.string().min(6).max(16).optional().meta({ description: 'A password reset of an account with a second factor needs its code, as a sign-in does (401 second_factor_required)', example: '123456' }),
});

export const LinkInfo = z
  .object({
    kind: z.enum(LINK_KINDS),
    email: z.string(),
    name: z.string().nullable(),
    workspace: z.object({ id: z.string(), name: z.string() }),
    expires_at: Timestamp,
    password_set: z.boolean(),
  })
  .meta({ id: 'ConsoleLinkInfo', description: 'What a one-time link is for (inspecting does not use it)' });

export const IssuedLink = z
  .object({
    kind: z.enum(LINK_KINDS),
    url: z.string().meta({ description: 'The console page that redeems it (the token is in the fragment); works once', example: 'https://concierge.example.com/console/link#token=x3Jq0m2Vw9mJ8Rk1b4Yp7Qe6Ls5Nd0Tf2Ha9Uc8Ze1o' }),
    expires_at: Timestamp,
  })
  .meta({ id: 'ConsoleIssuedLink' });

export const InviteBody = z.object({
  email: Email,
  name: z.string().min(1).max(200).optional(),
  role: Role,
});

export const Invitation = z
  .object({
    user: ConsoleUser,
    link: IssuedLink,
    emailed: z.boolean().meta({ description: 'Whether the link was mailed (SMTP_URL set and accepted); either way it is shown here, to pass on' }),
  })
  .meta({ id: 'ConsoleInvitation' });

export const UpdateUserBody = z.object({ role: Role });
export const UserId = z.object({ id: idString('usr') });
export const KeyId = z.object({ id: idString('key') });

const KeyFields = {
  id: z.string().meta({ example: 'key_0a1b2c3d4e5f60718293a4b5' }),
  name: z.string(),
  prefix: z.string().meta({ description: "'sk_' and the first 8 characters: the only part shown again", example: 'sk_1a2b3c4d' }),
  scopes: z.array(z.string()),
  status: z.enum(['active', 'revoked']),
  created_at: Timestamp,
  rotated_at: Timestamp.nullable(),
  revoked_at: Timestamp.nullable(),
  last_used_at: Timestamp.nullable().meta({ description: 'To the minute (recorded at most once a minute)' }),
  copyable: z.boolean().meta({ description: 'false for keys made before values were kept for copying (rotate to get one) and for deleted keys' }),
};

export const ConsoleKey = z.object(KeyFields).meta({ id: 'ConsoleApiKey' });
export const ConsoleKeyList = z.object({ keys: z.array(ConsoleKey) }).meta({ id: 'ConsoleApiKeyList' });
export const ConsoleKeyWithValue = z
  .object({ ...KeyFields, key: z.string().meta({ description: 'The full key, shown here once', example: `sk_${'0'.repeat(64)}` }) })
  .meta({ id: 'ConsoleApiKeyWithValue' });
export const KeyValue = z.object({ id: z.string(), key: z.string() }).meta({ id: 'ConsoleApiKeyValue' });

export const KeyScopes = z
  .object({
    scopes: z.array(z.object({ scope: z.string(), label: z.string(), default: z.boolean().meta({ description: 'Pre-selected for a new key' }) })),
  })
  .meta({ id: 'ConsoleKeyScopes' });

const Scope = z.enum(ALL_SCOPES as [string, ...string[]]);
export const CreateKeyBody = z.object({
  name: z.string().min(1).max(200),
  scopes: z.array(Scope).min(1).max(ALL_SCOPES.length).optional().meta({ description: 'Default: documents:extract, kb:read, kb:write, memory:write' }),
});

export const AuditEvent = z
  .object({
    id: z.string().meta({ example: 'aud_0a1b2c3d4e5f60718293a4b5' }),
    action: z.string().meta({ example: 'key.created' }),
    created_at: Timestamp,
    actor: z.object({ type: z.enum(ACTOR_TYPES), id: z.string().nullable(), email: z.string().nullable() }),
    ip: z.string().nullable(),
    user_agent: z.string().nullable(),
    target: z.object({ type: z.string(), id: z.string() }).nullable(),
    details: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'AuditEvent' });

export const AuditEventList = z.object({ events: z.array(AuditEvent), next_cursor: z.string().nullable() }).meta({ id: 'AuditEventList' });
export const AuditQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
  action: z.string().min(1).max(100).optional().meta({ description: 'Only events of this action (e.g. user.signed_in)' }),
});

/** Every console operation with a session can answer these. */
export const sessionErrors = {
  401: ErrorBody.meta({ description: 'not_signed_in: no session cookie, or the session expired or was signed out; an API key is never accepted here' }),
  403: ErrorBody.meta({ description: "csrf_failed: an unsafe request without the session's X-CSRF-Token or from another origin; forbidden: the role may not do this" }),
  429: ErrorBody.meta({ description: 'rate_limited: per user and per workspace, as for keys; see Retry-After' }),
} as const;
