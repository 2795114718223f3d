import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, createdAtMs, p, updatedAt } from './common';

export const Customer = defineEntity({
  name: 'Customer',
  tableName: 'customers',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    name: p.text().nullable(),
    email: p.text().nullable(),
    phone: p.text().nullable(),
    externalId: p.text().nullable(),
    metadata: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
    createdAt: createdAtMs().defaultRaw('now()'),
    updatedAt: updatedAt(),
  },
});
export type ICustomer = InferEntity<typeof Customer>;

/** One customer per identity: the same phone, email or external id never names two customers. */
export const CustomerIdentity = defineEntity({
  name: 'CustomerIdentity',
  tableName: 'customer_identities',
  properties: {
    workspaceId: p.text().primary(),
    kind: p.enum(['phone', 'email', 'external_id'] as const).columnType('text').primary(),
    value: p.text().primary(),
    customerId: p.text(),
    createdAt: createdAt(),
  },
});
export type ICustomerIdentity = InferEntity<typeof CustomerIdentity>;
