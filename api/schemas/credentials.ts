import { z } from 'zod';
import { CREDENTIAL_PROVIDERS } from '../../db/entities';
import { Cursor } from './common';

export { CredentialInput as CreateCredentialBody } from '../../domain/credentials/credentials';

const Timestamp = z.string().meta({ format: 'date-time' });
const Provider = z.enum(CREDENTIAL_PROVIDERS);

export const Credential = z
  .object({
    id: z.string().meta({ example: 'cred_0a1b2c3d4e5f60718293a4b5' }),
    name: z.string(),
    provider: Provider,
    settings: z.record(z.string(), z.string()).meta({
      description: 'The non-secret fields given at registration (msgapp: business_account_id; llm: base_url; voice: url, api_key; telephony: username, sip_uri)',
      example: { business_account_id: '100000000000001' },
    }),
    secret_field: z.string().meta({ description: 'Which input field holds the sealed secret (access_token, api_key, api_secret, password, bearer_token)', example: 'access_token' }),
    last4: z.string().nullable().meta({ description: "The secret's last four characters; null when the secret is shorter than 16 characters", example: 'x9Qz' }),
    fingerprint: z.string().meta({ description: 'A keyed hash of the secret: the same secret registered twice has the same fingerprint', example: 'fp_3f2a9c0d1e4b5a6978c0d1e2' }),
    created_at: Timestamp,
  })
  .meta({ id: 'Credential', description: 'A provider credential. The secret is write-only: no response ever contains it.' });

export const CredentialList = z.object({ credentials: z.array(Credential), next_cursor: z.string().nullable() }).meta({ id: 'CredentialList' });

export const ListCredentialsQuery = z.object({
  provider: Provider.optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});

const PhoneNumberResource = z
  .object({
    type: z.literal('phone_number'),
    id: z.string().meta({ description: 'The phone_number_id (use it in an agent’s msgapp trigger)', example: '109876543210' }),
    display_phone_number: z.string().meta({ example: '+1 555-010-0001' }),
    verified_name: z.string().nullable(),
    quality_rating: z.string().nullable().meta({ example: 'GREEN' }),
  })
  .meta({ id: 'PhoneNumberResource' });

const ModelResource = z
  .object({
    type: z.literal('model'),
    id: z.string().meta({ example: 'gpt-4o-mini' }),
    owned_by: z.string().nullable(),
    created_at: Timestamp.nullable(),
  })
  .meta({ id: 'ModelResource' });

export const CredentialResources = z
  .object({
    credential_id: z.string(),
    provider: Provider,
    resources: z.array(z.discriminatedUnion('type', [PhoneNumberResource, ModelResource])),
  })
  .meta({
    id: 'CredentialResources',
    description: 'What the credential unlocks, as the provider answers now: msgapp: the phone numbers of its business account; llm: the models of its server',
  });
