import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

/** A console user's TOTP second factor (domain/people/totp.ts owns the table): the secret sealed, bound to the user. */
export const UserTotp = defineEntity({
  name: 'UserTotp',
  tableName: 'user_totp',
  properties: {
    userId: p.text().primary(),
    secretSealed: p.text(),
    /** Null while enrolling: the secret was shown, no code has confirmed it yet (it is not asked at sign-in). */
    confirmedAt: p.datetime().nullable(),
    /** The last 30-second step a code was accepted for: a code is good once. */
    lastStep: p.bigint('number').nullable(),
    createdAt: createdAt(),
  },
});
export type IUserTotp = InferEntity<typeof UserTotp>;

/** A workspace's sign-in rules set by an owner: whether every password sign-in needs a TOTP code. */
export const SignInPolicy = defineEntity({
  name: 'SignInPolicy',
  tableName: 'sign_in_policies',
  properties: {
    workspaceId: p.text().primary(),
    totpRequired: p.boolean(),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type ISignInPolicy = InferEntity<typeof SignInPolicy>;
