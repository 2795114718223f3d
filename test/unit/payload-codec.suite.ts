// The Temporal payload codec: AES-256-GCM under a sub-key of CONCIERGE_ENCRYPTION_KEY, named in each payload.
import { randomBytes } from 'node:crypto';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { decryptPayloadsIn, ENCODING_ENCRYPTED, EncryptionCodec, METADATA_KEY_ID, payloadKey, serviceCodec } from '../../lib/crypto/payload-codec';
import { SecretBox } from '../../lib/crypto/secret-box';

const box = new SecretBox(randomBytes(32));
const TEXT = 'my card ends in 4242 and I live at 42 Secret Lane';
const payload = (v: unknown): Payload => defaultPayloadConverter.toPayload(v)!;
const str = (b: Uint8Array | null | undefined) => Buffer.from(b ?? []).toString('utf8');

test('an encoded payload names binary/encrypted and its key id, holds no plain text (nor the JSON encoding), and decodes to the original', async () => {
  const codec = serviceCodec(box, 1);
  const original = payload({ text: TEXT });
  const [enc] = await codec.encode([original]);
  expect(str(enc.metadata!.encoding)).toBe(ENCODING_ENCRYPTED);
  expect(str(enc.metadata![METADATA_KEY_ID])).toBe(payloadKey(box, 1).id);
  expect(Object.keys(enc.metadata!).sort()).toEqual(['encoding', METADATA_KEY_ID].sort());
  expect(str(enc.data)).not.toContain('Secret Lane');
  expect(str(enc.data)).not.toContain('json/plain');
  const [dec] = await codec.decode([enc]);
  expect(defaultPayloadConverter.fromPayload(dec)).toEqual({ text: TEXT });
  expect(str(dec.metadata!.encoding)).toBe('json/plain');
});

test('the payload key is a sub-key derived with HKDF, not CONCIERGE_ENCRYPTION_KEY itself', () => {
  const raw = randomBytes(32);
  const k = payloadKey(new SecretBox(raw), 1);
  expect(k.key).toHaveLength(32);
  expect(k.key.equals(raw)).toBe(false);
  expect(payloadKey(new SecretBox(raw), 2).key.equals(k.key)).toBe(false);
});

test('payloads without the encrypted encoding (histories from before, the replay fixtures) pass through unchanged', async () => {
  const plain = payload({ text: 'hello' });
  const binaryNull = { metadata: { encoding: Buffer.from('binary/null') } };
  const out = await serviceCodec(box, 1).decode([plain, binaryNull]);
  expect(out[0]).toBe(plain);
  expect(out[1]).toBe(binaryNull);
});

test('after rotation (TEMPORAL_PAYLOAD_KEY_VERSION 1 -> 2) a payload encrypted under the old key id still decodes; new ones use the new id', async () => {
  const [old] = await serviceCodec(box, 1).encode([payload(TEXT)]);
  const rotated = serviceCodec(box, 2);
  expect(defaultPayloadConverter.fromPayload((await rotated.decode([old]))[0])).toBe(TEXT);
  const [fresh] = await rotated.encode([payload(TEXT)]);
  expect(str(fresh.metadata![METADATA_KEY_ID])).toBe(payloadKey(box, 2).id);
  expect(str(fresh.metadata![METADATA_KEY_ID])).not.toBe(str(old.metadata![METADATA_KEY_ID]));
  // The old generation alone cannot read what the new one wrote.
  await expect(serviceCodec(box, 1).decode([fresh])).rejects.toThrow(/key id 'g2-[0-9a-f]{12}', which this process does not hold/);
});

test('a payload of another CONCIERGE_ENCRYPTION_KEY, a tampered one, or one relabelled with another key id does not decode', async () => {
  const codec = serviceCodec(box, 2);
  const [enc] = await codec.encode([payload(TEXT)]);
  await expect(serviceCodec(new SecretBox(randomBytes(32)), 2).decode([enc])).rejects.toThrow(/does not hold/);
  const tampered = { ...enc, data: Buffer.from(enc.data!) };
  tampered.data[20] ^= 1;
  await expect(codec.decode([tampered])).rejects.toThrow(/unable to authenticate/);
  // Both generations are held, but the id is authenticated: relabelling a g2 payload as g1 fails.
  const relabelled = { ...enc, metadata: { ...enc.metadata, [METADATA_KEY_ID]: Buffer.from(payloadKey(box, 1).id) } };
  await expect(codec.decode([relabelled])).rejects.toThrow(/unable to authenticate/);
});

test('each encoding uses a fresh IV: the same value never encrypts to the same bytes', async () => {
  const codec = new EncryptionCodec([payloadKey(box, 1)]);
  const [a, b] = await codec.encode([payload(TEXT), payload(TEXT)]);
  expect(Buffer.from(a.data!).equals(Buffer.from(b.data!))).toBe(false);
});

test('decryptPayloadsIn gives a history back with every encrypted payload decrypted, at any depth, the rest untouched', async () => {
  const codec = serviceCodec(box, 1);
  const [a, b] = await codec.encode([payload(TEXT), payload({ message: 'boom' })]);
  const plain = payload('plain');
  const history = { events: [{ eventId: '1', input: { payloads: [a, plain] } }, { failure: { message: 'Encoded failure', encodedAttributes: b } }] };
  const out = await decryptPayloadsIn(history, codec);
  expect(defaultPayloadConverter.fromPayload(out.events[0].input!.payloads[0])).toBe(TEXT);
  expect(out.events[0].input!.payloads[1]).toEqual(plain);
  expect(defaultPayloadConverter.fromPayload(out.events[1].failure!.encodedAttributes)).toEqual({ message: 'boom' });
  expect(out.events[0].eventId).toBe('1');
  expect(JSON.stringify(out)).not.toContain(ENCODING_ENCRYPTED);
});
