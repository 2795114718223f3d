import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p, updatedAt } from './common';

/** A workspace's OpenID Connect sign-in (domain/people/sso.ts owns these tables): one identity provider per workspace. */
export const SsoSettings = defineEntity({
  name: 'SsoSettings',
  tableName: 'sso_settings',
  properties: {
    workspaceId: p.text().primary(),
    /** The issuer's URL, as its discovery document must name it. */
    issuer: p.text(),
    clientId: p.text(),
    /** Sealed with the service's key, bound to the workspace's id; never returned (only its last four). */
    clientSecretSealed: p.text(),
    clientSecretLast4: p.text(),
    /** What a person the IdP vouches for becomes at their first sign-in (never owner). */
    defaultRole: p.enum(['admin', 'agent', 'viewer'] as const).columnType('text'),
    enabled: p.boolean(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
});
export type ISsoSettings = InferEntity<typeof SsoSettings>;

/** An email domain served by a workspace's SSO: a domain belongs to one workspace only (the primary key). */
export const SsoDomain = defineEntity({
  name: 'SsoDomain',
  tableName: 'sso_domains',
  properties: {
    domain: p.text().primary(),
    workspaceId: p.text(),
  },
});
export type ISsoDomain = InferEntity<typeof SsoDomain>;

/** A console user bound to an identity of an IdP: (issuer, subject) is unique, and a user has one per issuer. */
export const UserIdentity = defineEntity({
  name: 'UserIdentity',
  tableName: 'user_identities',
  properties: {
    id: p.text().primary(),
    userId: p.text(),
    workspaceId: p.text(),
    issuer: p.text(),
    subject: p.text(),
    /** The email the IdP gave when the binding was made (for people reading the table; never used to match). */
    email: p.text(),
    createdAt: createdAt(),
    lastUsedAt: p.datetime().nullable(),
  },
});
export type IUserIdentity = InferEntity<typeof UserIdentity>;
