import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, createdAtMs, p } from './common';

export const CONSOLE_ROLES = ['owner', 'admin', 'agent', 'viewer'] as const;
export type ConsoleRole = (typeof CONSOLE_ROLES)[number];

/** A person who signs in to the console (domain/people/users.ts owns the table). */
export const ConsoleUser = defineEntity({
  name: 'ConsoleUser',
  tableName: 'console_users',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    /** As given; unique per workspace by lower(email) (the migration's index). */
    email: p.text(),
    name: p.text().nullable(),
    role: p.enum([...CONSOLE_ROLES]).columnType('text'),
    /** `invited`: no password yet (an invitation or sign-in link sets it); `active`: signs in with a password. */
    status: p.enum(['invited', 'active'] as const).columnType('text'),
    /** argon2id, PHC string; null until the user sets a password. */
    passwordHash: p.text().nullable(),
    createdAt: createdAtMs(),
    lastSignInAt: p.datetime().nullable(),
    passwordChangedAt: p.datetime().nullable(),
  },
});
export type IConsoleUser = InferEntity<typeof ConsoleUser>;

/** A signed-in browser: only the SHA-256 of the cookie's token is stored (domain/people/sessions.ts). */
export const ConsoleSession = defineEntity({
  name: 'ConsoleSession',
  tableName: 'console_sessions',
  properties: {
    id: p.text().primary(),
    tokenHash: p.text(),
    userId: p.text(),
    workspaceId: p.text(),
    /** The synchronizer token unsafe requests must echo in X-CSRF-Token. */
    csrfToken: p.text(),
    createdAt: createdAt(),
    /** Refreshed at most once a minute; idle expiry counts from it. */
    lastSeenAt: p.datetime().defaultRaw('now()'),
    /** The absolute end, set at sign-in. */
    expiresAt: p.datetime(),
    revokedAt: p.datetime().nullable(),
    ip: p.text().nullable(),
    userAgent: p.text().nullable(),
  },
});
export type IConsoleSession = InferEntity<typeof ConsoleSession>;

export const LINK_KINDS = ['sign_in', 'invitation', 'password_reset'] as const;
export type LinkKind = (typeof LINK_KINDS)[number];

/** A one-time link: only the SHA-256 of its token is stored; consumed once (domain/people/links.ts). */
export const ConsoleLink = defineEntity({
  name: 'ConsoleLink',
  tableName: 'console_links',
  properties: {
    id: p.text().primary(),
    tokenHash: p.text(),
    kind: p.enum([...LINK_KINDS]).columnType('text'),
    userId: p.text(),
    workspaceId: p.text(),
    createdAt: createdAt(),
    expiresAt: p.datetime(),
    usedAt: p.datetime().nullable(),
  },
});
export type IConsoleLink = InferEntity<typeof ConsoleLink>;
