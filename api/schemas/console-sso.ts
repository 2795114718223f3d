import { z } from 'zod';
import { SSO_DEFAULT_ROLES } from '../../domain/people/sso';

const Domain = z.string().min(1).max(253).meta({ example: 'example.com' });

export const SsoSettingsBody = z.object({
  issuer: z.string().min(1).max(2048).meta({ description: "The IdP's issuer URL (https; its /.well-known/openid-configuration must name the same issuer)", example: 'https://login.example.com' }),
  client_id: z.string().min(1).max(255),
  client_secret: z.string().min(1).max(1024).optional().meta({ description: 'Required the first time; omit it to keep the stored one. Write-only: never returned (only its last four characters)' }),
  email_domains: z.array(Domain).min(1).max(20).meta({ description: 'The email domains this IdP serves: `GET /api/console/sso/start?email=` sends their people here. A domain belongs to one workspace only (409 sso_domain_taken)' }),
  default_role: z.enum(SSO_DEFAULT_ROLES).meta({ description: 'What a person becomes at their first SSO sign-in when the workspace has no user of their email (never owner)' }),
  enabled: z.boolean(),
});

export const SsoSettingsView = z
  .object({
    issuer: z.string(),
    client_id: z.string(),
    client_secret_last4: z.string().meta({ description: "The client secret's last four characters (the secret itself is never returned)" }),
    email_domains: z.array(z.string()),
    default_role: z.enum(SSO_DEFAULT_ROLES),
    enabled: z.boolean(),
    redirect_uri: z.string().meta({ description: "Register this at the IdP as the client's redirect URI", example: 'https://concierge.example.com/api/console/sso/callback' }),
    updated_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'ConsoleSsoSettings' });

export const SsoSettingsAnswer = z.object({ sso: SsoSettingsView.nullable().meta({ description: 'null: no SSO is set up' }) }).meta({ id: 'ConsoleSsoSettingsAnswer' });

export const SsoStartQuery = z.object({ email: z.string().min(1).max(254).meta({ format: 'email', example: 'ada@example.com' }) });

/** What the IdP sends back: read by the OpenID Connect client itself from the URL (all optional here, checked there). */
export const SsoCallbackQuery = z.object({
  code: z.string().max(4096).optional(),
  state: z.string().max(1024).optional(),
  iss: z.string().max(2048).optional(),
  error: z.string().max(256).optional(),
  error_description: z.string().max(2048).optional(),
  session_state: z.string().max(1024).optional(),
});
