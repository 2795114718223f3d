import { z } from 'zod';
import { Cursor } from './common';

const Timestamp = z.string().meta({ format: 'date-time' });
const E164 = z.string().regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 number such as +15551234567');
/**
 * An email address as RFC 5321 bounds it: zod's address form, with domain labels that neither
 * end with a hyphen nor exceed 63 characters, a local part of at most 64 and a domain of at
 * most 253 characters. The document says `format: email`, and that is what clients and
 * fuzzers check: an address it refuses is refused here too.
 */
const Email = z
  .email({ pattern: /^(?:[A-Za-z0-9_'+\-]+\.)*[A-Za-z0-9_'+\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$/ })
  .max(320)
  .refine((s) => s.indexOf('@') <= 64 && s.length - s.indexOf('@') - 1 <= 253, 'at most 64 characters before the @ and 253 after it');
const ExternalId = z.string().min(1).max(200);

export const Customer = z
  .object({
    id: z.string().meta({ example: 'cus_9a8b7c6d5e4f3a2b1c0d9e8f' }),
    name: z.string().nullable(),
    email: z.string().nullable(),
    phone: z.string().nullable(),
    external_id: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    identities: z.array(z.object({ kind: z.enum(['phone', 'email', 'external_id']), value: z.string() })),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Customer' });

export const CustomerList = z.object({ customers: z.array(Customer), next_cursor: z.string().nullable() }).meta({ id: 'CustomerList' });
export const ListCustomersQuery = z.object({
  phone: E164.optional(),
  email: Email.optional(),
  external_id: ExternalId.optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});

export const CreateCustomerBody = z
  .object({
    name: z.string().min(1).max(200).nullable().optional(),
    email: Email.nullable().optional(),
    phone: E164.nullable().optional(),
    external_id: ExternalId.nullable().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export const PatchCustomerBody = CreateCustomerBody.refine((b) => Object.keys(b).length > 0, 'body: at least one field').meta({ minProperties: 1 });

export const LinkBody = z
  .object({
    customer_id: z.string().min(1).max(100).optional().meta({ description: 'The customer to attach to; omitted: the oldest customer holding one of the identities, else a new one' }),
    phone: E164.optional(),
    email: Email.optional(),
    external_id: ExternalId.optional(),
  })
  .strict()
  .refine((b) => b.phone || b.email || b.external_id, 'body: at least one of phone, email, external_id')
  .meta({ anyOf: [{ required: ['phone'] }, { required: ['email'] }, { required: ['external_id'] }] });
export const LinkResult = z
  .object({ customer: Customer, merged_customer_ids: z.array(z.string()).meta({ description: 'Customers merged into this one (and deleted)' }) })
  .meta({ id: 'CustomerLinkResult' });
