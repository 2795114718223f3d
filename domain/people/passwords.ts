import { createHash, randomBytes } from 'node:crypto';
import { hash, verify, type Algorithm } from '@node-rs/argon2';
import { DomainError } from '../errors';
import { COMMON_PASSWORDS } from './common-passwords';

export const MIN_PASSWORD_LENGTH = 12;
/** argon2 hashes whatever it is given, but a megabyte password is a denial of service, not a password. */
export const MAX_PASSWORD_LENGTH = 256;

const COMMON = new Set(COMMON_PASSWORDS.split('\n'));

/**
 * argon2id with OWASP's minimum (19 MiB, 2 passes, 1 lane): @node-rs/argon2's defaults, spelt out so a library
 * upgrade cannot weaken them silently. Algorithm.Argon2id is 2 (a const enum the isolated build cannot inline).
 */
const ARGON2 = { algorithm: 2 as Algorithm, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

/** 400 weak_password unless the password is long enough and not one of the common ones (case-insensitively). */
export function checkPasswordStrength(password: string, email?: string): void {
  if ([...password].length < MIN_PASSWORD_LENGTH) throw new DomainError('weak_password', `password: at least ${MIN_PASSWORD_LENGTH} characters`);
  if (password.length > MAX_PASSWORD_LENGTH) throw new DomainError('weak_password', `password: at most ${MAX_PASSWORD_LENGTH} characters`);
  const lower = password.toLowerCase();
  if (COMMON.has(lower)) throw new DomainError('weak_password', 'password: one of the most common passwords; choose another');
  if (email && lower === email.toLowerCase()) throw new DomainError('weak_password', 'password: must not be the email address');
  if (new Set(password).size < 4) throw new DomainError('weak_password', 'password: too repetitive; choose another');
}

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2);
}

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    return await verify(stored, password);
  } catch {
    return false;
  }
}

/** A hash of nothing anyone knows, made once: verified against when no user has the email, so both cost the same. */
let dummy: Promise<string> | null = null;
export async function dummyVerify(password: string): Promise<void> {
  dummy ??= hashPassword(createHash('sha256').update(randomBytes(32)).digest('hex'));
  await verifyPassword(await dummy, password);
}
