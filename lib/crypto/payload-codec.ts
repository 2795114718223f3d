import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type DataConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { SecretBox } from './secret-box';

/** The encoding an encrypted payload declares (the name Temporal's samples and codec servers use). */
export const ENCODING_ENCRYPTED = 'binary/encrypted';
/** Metadata naming the key that sealed a payload, so keys can rotate while older histories still decode. */
export const METADATA_KEY_ID = 'encryption-key-id';

export type { Payload, PayloadCodec };

const IV_BYTES = 12;
const TAG_BYTES = 16;
const ProtoPayload = temporal.api.common.v1.Payload;

export interface PayloadKey {
  id: string;
  key: Buffer;
}

export class PayloadKeyError extends Error {}

/**
 * The sub-key of one generation, derived from the service's key with HKDF (never the key
 * itself, which seals secrets at rest), and its id: the generation and a fingerprint of the
 * derived key, so a payload sealed under another CONCIERGE_ENCRYPTION_KEY is recognised as
 * such instead of failing as a forgery.
 */
export function payloadKey(box: SecretBox, generation: number): PayloadKey {
  const key = box.deriveKey(`concierge temporal payloads v${generation}`);
  const fingerprint = createHash('sha256').update(key).digest('hex').slice(0, 12);
  return { id: `g${generation}-${fingerprint}`, key };
}

/** Every generation up to `current`: the newest encrypts, all of them decrypt. */
export function payloadKeys(box: SecretBox, current: number): PayloadKey[] {
  const keys: PayloadKey[] = [];
  for (let g = current; g >= 1; g--) keys.push(payloadKey(box, g));
  return keys;
}

/**
 * AES-256-GCM over whole payloads (metadata included, so the JSON encoding name is hidden
 * too): Temporal's server, its database and anyone reading histories see only
 * `binary/encrypted` blobs. Payloads without that encoding (histories written before this
 * codec, the replay fixtures) pass through as they are. The key id is bound as associated
 * data, so a blob relabelled with another id does not decrypt.
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly current: PayloadKey;
  private readonly byId: Map<string, Buffer>;

  /** `keys[0]` encrypts; every key decrypts what names its id. */
  constructor(keys: PayloadKey[]) {
    if (!keys.length) throw new Error('EncryptionCodec needs at least one key');
    this.current = keys[0];
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  /** Whether payloads naming this key id can be decrypted here. */
  holds(id: string): boolean {
    return this.byId.has(id);
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => {
      const { id, key } = this.current;
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(id, 'utf8'));
      const ct = Buffer.concat([cipher.update(ProtoPayload.encode(p).finish()), cipher.final()]);
      return {
        metadata: { [METADATA_ENCODING_KEY]: Buffer.from(ENCODING_ENCRYPTED), [METADATA_KEY_ID]: Buffer.from(id) },
        data: Buffer.concat([iv, ct, cipher.getAuthTag()]),
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => {
      const encoding = p.metadata?.[METADATA_ENCODING_KEY];
      if (!encoding || Buffer.from(encoding).toString() !== ENCODING_ENCRYPTED) return p;
      const rawId = p.metadata?.[METADATA_KEY_ID];
      const id = rawId ? Buffer.from(rawId).toString() : '';
      const key = this.byId.get(id);
      if (!key) {
        throw new PayloadKeyError(
          `payload encrypted with key id '${id}', which this process does not hold (a later TEMPORAL_PAYLOAD_KEY_VERSION, or another CONCIERGE_ENCRYPTION_KEY)`,
        );
      }
      const data = Buffer.from(p.data ?? []);
      if (data.length < IV_BYTES + TAG_BYTES) throw new PayloadKeyError(`encrypted payload (key id '${id}') is truncated`);
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(id, 'utf8'));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
      return ProtoPayload.decode(plain) as Payload;
    });
  }
}

/**
 * The data converter of every Temporal client and worker of the service (and of the replay
 * command): payloads encrypted by the codec, and failures' messages and stack traces moved
 * into an encoded payload (`encodeCommonAttributes`, ./failure-converter.ts) so they are
 * encrypted as well. Workflow bundles must be built with the same failureConverterPath.
 * Codecs run outside the workflow sandbox, so node:crypto is fine here.
 */
export function temporalDataConverter(codec: PayloadCodec): DataConverter {
  return { payloadCodecs: [codec], failureConverterPath: FAILURE_CONVERTER_PATH };
}

/** The module exporting the failure converter (`encodeCommonAttributes: true`), for the data converter and the workflow bundles. */
export const FAILURE_CONVERTER_PATH = require.resolve('./failure-converter');

/** The service's codec: the key generations of TEMPORAL_PAYLOAD_KEY_VERSION derived from the SecretBox's key. */
export function serviceCodec(box: SecretBox, generation: number): EncryptionCodec {
  return new EncryptionCodec(payloadKeys(box, generation));
}

/**
 * A copy of a history (or any proto object) with every encrypted payload decrypted, failures'
 * encoded attributes included: what the replay fixtures store (test/replay/histories), so
 * they replay without the key of the run that recorded them.
 */
export async function decryptPayloadsIn<T>(value: T, codec: EncryptionCodec): Promise<T> {
  const walk = async (v: unknown): Promise<unknown> => {
    if (!v || typeof v !== 'object' || ArrayBuffer.isView(v)) return v;
    if (Array.isArray(v)) return Promise.all(v.map(walk));
    const p = v as Payload;
    const encoding = p.metadata?.[METADATA_ENCODING_KEY];
    if (encoding && 'data' in p && Buffer.from(encoding).toString() === ENCODING_ENCRYPTED) return (await codec.decode([p]))[0];
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = await walk(x);
    return out;
  };
  return (await walk(value)) as T;
}
