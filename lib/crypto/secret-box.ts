import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * AES-256-GCM for secrets at rest (webhook signing secrets, provider credentials).
 * Stored form: `v1.<base64url iv>.<base64url tag>.<base64url ciphertext>`; the
 * associated data binds a ciphertext to its row, so a secret copied into another
 * row does not decrypt.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('encryption key must be 32 bytes');
    this.key = key;
  }

  /** Parses CONCIERGE_ENCRYPTION_KEY: 64 hex characters or base64 of 32 bytes. */
  static fromString(value: string): SecretBox {
    const v = value.trim();
    const key = /^[0-9a-fA-F]{64}$/.test(v) ? Buffer.from(v, 'hex') : Buffer.from(v, 'base64');
    if (key.length !== 32) throw new Error('CONCIERGE_ENCRYPTION_KEY must be 32 bytes, as 64 hex characters or base64');
    return new SecretBox(key);
  }

  /** The embedded default: a key generated once into the data directory (mode 0600). */
  static fromDataDir(dir: string): SecretBox {
    const file = path.join(dir, 'encryption.key');
    fs.mkdirSync(dir, { recursive: true });
    try {
      fs.writeFileSync(file, randomBytes(32).toString('hex'), { flag: 'wx', mode: 0o600 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    return SecretBox.fromString(fs.readFileSync(file, 'utf8'));
  }

  /** A 32-byte key of its own for another purpose (HKDF-SHA256 of the encryption key, `info` naming the purpose). */
  deriveKey(info: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), info, 32));
  }

  /** A MAC key of its own, derived from the encryption key (never the key itself). */
  private macKey(): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), 'concierge signed links v1', 32));
  }

  /** Hex HMAC-SHA256 of `data` (signed, expiring links). */
  mac(data: string): string {
    return createHmac('sha256', this.macKey()).update(data).digest('hex');
  }

  verifyMac(data: string, mac: string): boolean {
    const expected = Buffer.from(this.mac(data), 'hex');
    const given = /^[0-9a-f]{64}$/.test(mac) ? Buffer.from(mac, 'hex') : Buffer.alloc(0);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  seal(plaintext: string, associatedData: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  open(sealed: string, associatedData: string): string {
    const [version, iv, tag, ct] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unrecognised sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}

/** What a table holds sealed with the service's key: how many secrets, and one to try a key on (bound to its row id). */
export interface SealedSecrets {
  count: number;
  sample: { id: string; sealed: string } | null;
}
