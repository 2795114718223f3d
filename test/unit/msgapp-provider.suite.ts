import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CloudApiProvider,
  ProviderError,
  WebhookPayloadError,
  buildMessagePayload,
  parseWebhook,
  signHubPayload,
  statusSupersedes,
  verifyHubSignature,
  type OutboundContent,
} from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, startWebhookRecorder, type MsgappSandbox, type WebhookRecorder } from '../../dev/fake-msgapp';

const APP_SECRET = 'app-secret-for-tests';
const TOKEN = 'EAAG-test-token';
const PHONE_ID = '106540352242922';

let sandbox: MsgappSandbox;
let receiver: WebhookRecorder;
let provider: CloudApiProvider;

beforeAll(async () => {
  receiver = await startWebhookRecorder();
  sandbox = await startMsgappSandbox({
    appSecret: APP_SECRET,
    accessToken: TOKEN,
    webhookUrl: receiver.url,
    statusDelaysMs: { delivered: 20, read: 40 },
    numbers: [{ phoneNumberId: PHONE_ID, displayPhoneNumber: '15550783881' }],
  });
  provider = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 2_000 });
});

afterAll(async () => {
  await sandbox?.close();
  await receiver?.close();
});

/** Expects `p` to reject with a ProviderError and returns it. */
async function providerError(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

/** A server answering every request with `handler`, for responses the sandbox never gives. */
async function scripted(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v21.0`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('CloudApiProvider.send', () => {
  const cases: Array<[string, OutboundContent, Record<string, unknown>]> = [
    ['text', { kind: 'text', text: 'Hello there' }, { type: 'text', text: { body: 'Hello there', preview_url: false } }],
    ['image with caption', { kind: 'image', url: 'https://cdn.example.com/a.jpg', caption: 'A' }, { type: 'image', image: { link: 'https://cdn.example.com/a.jpg', caption: 'A' } }],
    ['image without caption', { kind: 'image', url: 'https://cdn.example.com/a.jpg' }, { type: 'image', image: { link: 'https://cdn.example.com/a.jpg' } }],
    ['video', { kind: 'video', url: 'https://cdn.example.com/v.mp4', caption: 'V' }, { type: 'video', video: { link: 'https://cdn.example.com/v.mp4', caption: 'V' } }],
    ['audio', { kind: 'audio', url: 'https://cdn.example.com/a.ogg' }, { type: 'audio', audio: { link: 'https://cdn.example.com/a.ogg' } }],
    [
      'document',
      { kind: 'document', url: 'https://cdn.example.com/d.pdf', caption: 'Invoice', filename: 'invoice.pdf' },
      { type: 'document', document: { link: 'https://cdn.example.com/d.pdf', caption: 'Invoice', filename: 'invoice.pdf' } },
    ],
    [
      'location',
      { kind: 'location', latitude: 48.8584, longitude: 2.2945, name: 'Eiffel Tower', address: 'Champ de Mars, Paris' },
      { type: 'location', location: { latitude: 48.8584, longitude: 2.2945, name: 'Eiffel Tower', address: 'Champ de Mars, Paris' } },
    ],
    ['location without name', { kind: 'location', latitude: -33.86, longitude: 151.21 }, { type: 'location', location: { latitude: -33.86, longitude: 151.21 } }],
    [
      'template with variables',
      { kind: 'template', name: 'order_update', language: 'fr', variables: ['Ada', '#1042'] },
      {
        type: 'template',
        template: {
          name: 'order_update',
          language: { code: 'fr' },
          components: [
            {
              type: 'body',
              parameters: [
                { type: 'text', text: 'Ada' },
                { type: 'text', text: '#1042' },
              ],
            },
          ],
        },
      },
    ],
    ['template without variables', { kind: 'template', name: 'hello_world' }, { type: 'template', template: { name: 'hello_world', language: { code: 'en_US' } } }],
  ];

  test.each(cases)('%s: the sandbox receives exactly the Cloud API JSON', async (_name, content, typed) => {
    const before = sandbox.sent.length;
    const clientMessageId = `msg_${Math.random().toString(16).slice(2)}`;
    const res = await provider.send({ phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+15551230000', content, clientMessageId });
    expect(res.providerMessageId).toMatch(/^wamid\./);
    expect(sandbox.sent).toHaveLength(before + 1);
    const rec = sandbox.sent[before];
    expect(rec.phoneNumberId).toBe(PHONE_ID);
    expect(rec.providerMessageId).toBe(res.providerMessageId);
    // toStrictEqual: no stray keys, no undefined-valued keys.
    expect(rec.body).toStrictEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '+15551230000',
      ...typed,
      biz_opaque_callback_data: clientMessageId,
    });
    expect(buildMessagePayload('+15551230000', content)).toStrictEqual({ messaging_product: 'whatsapp', recipient_type: 'individual', to: '+15551230000', ...typed });
  });

  test('Graph errors map to ProviderError; retryable for 5xx, 429 and throttling codes, not for other 4xx', async () => {
    const send = () => provider.send({ phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+15551230000', content: { kind: 'text', text: 'x' }, clientMessageId: 'm1' });

    sandbox.failNext({ kind: 'send', status: 400, code: 131009, message: '(#131009) Parameter value is not valid' });
    const bad = await providerError(send());
    expect(bad).toMatchObject({ status: 400, code: 131009, retryable: false, message: 'HTTP 400: (#131009) Parameter value is not valid' });
    expect(bad.graph.fbtraceId).toEqual(expect.any(String));
    expect(bad.graph.type).toBe('OAuthException');

    sandbox.failNext({ kind: 'send', status: 500 });
    expect(await providerError(send())).toMatchObject({ status: 500, code: 131000, retryable: true });

    sandbox.failNext({ kind: 'send', status: 503, code: 2, message: 'Service temporarily unavailable' });
    expect(await providerError(send())).toMatchObject({ status: 503, code: 2, retryable: true });

    sandbox.failNext({ kind: 'send', status: 429 });
    expect(await providerError(send())).toMatchObject({ status: 429, code: 130429, retryable: true });

    // Meta returns most throttling with HTTP 400; the code decides.
    sandbox.failNext({ kind: 'send', status: 400, code: 131056, message: '(#131056) (Business Account, Consumer Account) pair rate limit hit' });
    expect(await providerError(send())).toMatchObject({ status: 400, code: 131056, retryable: true });

    // failNext is consumed once: the next send goes through.
    await expect(send()).resolves.toEqual({ providerMessageId: expect.stringMatching(/^wamid\./) });
  });

  test("the sandbox's own validation: an invalid payload is a non-retryable 400 (#100)", async () => {
    const err = await providerError(
      provider.send({ phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+15551230000', content: { kind: 'text', text: '' }, clientMessageId: 'm2' }),
    );
    expect(err).toMatchObject({ status: 400, code: 100, retryable: false, message: "HTTP 400: (#100) The parameter text['body'] is required." });

    const link = await providerError(
      provider.send({ phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+15551230000', content: { kind: 'image', url: 'ftp://x/y.png' }, clientMessageId: 'm3' }),
    );
    expect(link).toMatchObject({ status: 400, code: 100, retryable: false });
    expect(link.message).toMatch(/image\['link'\] is not a valid URI/);
  });

  test('bearer check: a wrong or missing token is a non-retryable 401 (#190)', async () => {
    const err = await providerError(
      provider.send({ phoneNumberId: PHONE_ID, accessToken: 'wrong', to: '+15551230000', content: { kind: 'text', text: 'x' }, clientMessageId: 'm4' }),
    );
    expect(err).toMatchObject({ status: 401, code: 190, retryable: false });

    const res = await fetch(`${sandbox.url}/${PHONE_ID}/messages`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messaging_product: 'whatsapp', to: '15551230000', type: 'text', text: { body: 'x' } }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: { message: expect.stringMatching(/access token/), type: 'OAuthException', code: 190, fbtrace_id: expect.any(String) } });
  });

  test('transport errors and time-outs are retryable, with status 0', async () => {
    const dead = await scripted(() => undefined);
    const deadUrl = dead.url;
    await dead.close(); // nothing listens there any more
    const refused = await providerError(
      new CloudApiProvider({ baseUrl: deadUrl, timeoutMs: 1_000 }).send({ phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+1555', content: { kind: 'text', text: 'x' }, clientMessageId: 'm5' }),
    );
    expect(refused).toMatchObject({ status: 0, code: 'transport', retryable: true });

    const silent = await scripted(() => undefined); // accepts, never answers
    try {
      const started = Date.now();
      const slow = await providerError(
        new CloudApiProvider({ baseUrl: silent.url, timeoutMs: 100 }).send({ phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+1555', content: { kind: 'text', text: 'x' }, clientMessageId: 'm6' }),
      );
      expect(slow).toMatchObject({ status: 0, code: 'timeout', retryable: true });
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      await silent.close();
    }
  });

  test('a non-Graph error body (proxy HTML) and a 2xx without messages[0].id', async () => {
    let answer: { status: number; body: string; type: string } = { status: 502, body: '<html>Bad Gateway</html>', type: 'text/html' };
    const server = await scripted((_req, res) => res.writeHead(answer.status, { 'Content-Type': answer.type }).end(answer.body));
    try {
      const p = new CloudApiProvider({ baseUrl: server.url, timeoutMs: 1_000 });
      const req = { phoneNumberId: PHONE_ID, accessToken: TOKEN, to: '+15551230000', content: { kind: 'text', text: 'x' } as const, clientMessageId: 'm7' };
      expect(await providerError(p.send(req))).toMatchObject({ status: 502, code: undefined, retryable: true, message: 'HTTP 502: <html>Bad Gateway</html>' });
      answer = { status: 403, body: '', type: 'text/plain' };
      expect(await providerError(p.send(req))).toMatchObject({ status: 403, retryable: false });
      answer = { status: 200, body: '{"messaging_product":"whatsapp","messages":[]}', type: 'application/json' };
      // The message may have been accepted: not retryable, or it could go out twice.
      expect(await providerError(p.send(req))).toMatchObject({ status: 200, code: 'invalid_response', retryable: false });
    } finally {
      await server.close();
    }
  });
});

describe('CloudApiProvider.downloadMedia', () => {
  const bytes = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) % 256));

  test('returns the exact bytes, the MIME type and the filename of injected media', async () => {
    const { mediaId } = await sandbox.injectInbound({
      from: '+15551230000',
      to: PHONE_ID,
      media: { kind: 'document', mimeType: 'application/pdf', bytes, filename: 'rapport été.pdf' },
    });
    const got = await provider.downloadMedia(mediaId!, TOKEN);
    expect(got.mimeType).toBe('application/pdf');
    expect(got.filename).toBe('rapport été.pdf');
    expect(Buffer.compare(got.bytes, bytes)).toBe(0);
  });

  test('unknown media id, wrong token, over the size cap', async () => {
    expect(await providerError(provider.downloadMedia('999999999999999', TOKEN))).toMatchObject({ status: 400, code: 100, retryable: false, graph: { subcode: 33 } });
    const { mediaId } = await sandbox.injectInbound({ from: '+15551230000', to: PHONE_ID, media: { kind: 'image', mimeType: 'image/png', bytes } });
    expect(await providerError(provider.downloadMedia(mediaId!, 'wrong'))).toMatchObject({ status: 401, code: 190, retryable: false });
    const small = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 2_000, maxMediaBytes: 1000 });
    expect(await providerError(small.downloadMedia(mediaId!, TOKEN))).toMatchObject({ code: 'too_large', retryable: false });
  });
});

describe('X-Hub-Signature-256', () => {
  const body = Buffer.from('{"object":"whatsapp_business_account","entry":[]}');
  const independent = (raw: Buffer, key: string) => `sha256=${createHmac('sha256', key).update(raw).digest('hex')}`;

  test('signHubPayload equals an independent HMAC-SHA256 of the raw bytes', () => {
    expect(signHubPayload(body, APP_SECRET)).toBe(independent(body, APP_SECRET));
    expect(signHubPayload(body.toString(), APP_SECRET)).toBe(independent(body, APP_SECRET));
  });

  test('verifyHubSignature accepts the right one and rejects everything else', () => {
    const header = independent(body, APP_SECRET);
    expect(verifyHubSignature(body, header, APP_SECRET)).toBe(true);
    expect(verifyHubSignature(body, header.toUpperCase().replace('SHA256=', 'sha256='), APP_SECRET)).toBe(true);
    expect(verifyHubSignature(Buffer.from(body.toString().replace('[]', '[{}]')), header, APP_SECRET)).toBe(false);
    expect(verifyHubSignature(body, header, `${APP_SECRET}x`)).toBe(false);
    expect(verifyHubSignature(body, undefined, APP_SECRET)).toBe(false);
    expect(verifyHubSignature(body, header.replace('sha256=', 'sha1='), APP_SECRET)).toBe(false);
    expect(verifyHubSignature(body, header.slice(0, -2), APP_SECRET)).toBe(false);
    expect(verifyHubSignature(body, 'sha256=zz', APP_SECRET)).toBe(false);
    // An empty secret never verifies, even against an HMAC made with it.
    expect(verifyHubSignature(body, independent(body, ''), '')).toBe(false);
    expect(() => signHubPayload(body, '')).toThrow(/empty/);
  });
});

describe('parseWebhook', () => {
  const metadata = { display_phone_number: '15550783881', phone_number_id: PHONE_ID };
  const wrap = (value: Record<string, unknown>, field = 'messages') => ({
    object: 'whatsapp_business_account',
    entry: [{ id: '102290129340398', changes: [{ value: { messaging_product: 'whatsapp', metadata, ...value }, field }] }],
  });

  test('inbound messages of every kind, with profile names; unknown types kept as unsupported', () => {
    const payload = wrap({
      contacts: [
        { profile: { name: 'Kerry Fisher' }, wa_id: '16315551181' },
        { profile: { name: 'Ada' }, wa_id: '447700900123' },
      ],
      messages: [
        { from: '16315551181', id: 'wamid.T1', timestamp: '1750857384', type: 'text', text: { body: 'this is a text message' } },
        {
          from: '447700900123',
          id: 'wamid.I1',
          timestamp: '1750857385',
          type: 'image',
          context: { from: '15550783881', id: 'wamid.OURS' },
          image: { caption: 'my receipt', mime_type: 'image/jpeg', sha256: 'IMAGE_HASH', id: '1234567890' },
        },
        { from: '16315551181', id: 'wamid.A1', timestamp: '1750857386', type: 'audio', audio: { mime_type: 'audio/ogg; codecs=opus', sha256: 'H', id: '222', voice: true } },
        { from: '16315551181', id: 'wamid.A2', timestamp: '1750857386', type: 'audio', audio: { mime_type: 'audio/mpeg', sha256: 'H', id: '223', voice: false } },
        { from: '16315551181', id: 'wamid.D1', timestamp: '1750857387', type: 'document', document: { filename: 'a.pdf', mime_type: 'application/pdf', sha256: 'H', id: '333' } },
        { from: '16315551181', id: 'wamid.V1', timestamp: '1750857387', type: 'video', video: { mime_type: 'video/mp4', sha256: 'H', id: '444' } },
        { from: '16315551181', id: 'wamid.S1', timestamp: '1750857387', type: 'sticker', sticker: { mime_type: 'image/webp', sha256: 'H', id: '555', animated: false } },
        { from: '16315551181', id: 'wamid.L1', timestamp: '1750857388', type: 'location', location: { latitude: 37.483307, longitude: 122.148981, name: 'Main Street Beach', address: 'Main Street Beach, Santa Cruz, CA' } },
        {
          from: '16315551181',
          id: 'wamid.U1',
          timestamp: '1750857389',
          type: 'unsupported',
          errors: [{ code: 131051, title: 'Message type unknown', message: 'Message type unknown', error_data: { details: 'Message type is currently not supported.' } }],
        },
        { from: '16315551181', id: 'wamid.B1', timestamp: '1750857390', type: 'interactive', interactive: { type: 'button_reply', button_reply: { id: 'yes', title: 'Yes' } } },
        { from: '16315551181', id: 'wamid.X1', timestamp: '1750857391', type: 'image', image: { caption: 'no id' } },
      ],
    });
    const { inbound, statuses, skipped } = parseWebhook(payload);
    expect(statuses).toEqual([]);
    expect(skipped).toEqual([]);
    const base = { phoneNumberId: PHONE_ID, displayPhoneNumber: '15550783881', from: '+16315551181', profileName: 'Kerry Fisher' };
    expect(inbound).toEqual([
      { ...base, providerMessageId: 'wamid.T1', timestamp: new Date(1750857384000), kind: 'text', rawType: 'text', text: 'this is a text message' },
      {
        ...base,
        from: '+447700900123',
        profileName: 'Ada',
        providerMessageId: 'wamid.I1',
        timestamp: new Date(1750857385000),
        kind: 'image',
        rawType: 'image',
        text: 'my receipt',
        media: { mediaId: '1234567890', mimeType: 'image/jpeg', sha256: 'IMAGE_HASH', caption: 'my receipt' },
        replyTo: 'wamid.OURS',
      },
      { ...base, providerMessageId: 'wamid.A1', timestamp: new Date(1750857386000), kind: 'voice', rawType: 'audio', text: null, media: { mediaId: '222', mimeType: 'audio/ogg; codecs=opus', sha256: 'H' } },
      { ...base, providerMessageId: 'wamid.A2', timestamp: new Date(1750857386000), kind: 'audio', rawType: 'audio', text: null, media: { mediaId: '223', mimeType: 'audio/mpeg', sha256: 'H' } },
      {
        ...base,
        providerMessageId: 'wamid.D1',
        timestamp: new Date(1750857387000),
        kind: 'document',
        rawType: 'document',
        text: null,
        media: { mediaId: '333', mimeType: 'application/pdf', sha256: 'H', filename: 'a.pdf' },
      },
      { ...base, providerMessageId: 'wamid.V1', timestamp: new Date(1750857387000), kind: 'video', rawType: 'video', text: null, media: { mediaId: '444', mimeType: 'video/mp4', sha256: 'H' } },
      { ...base, providerMessageId: 'wamid.S1', timestamp: new Date(1750857387000), kind: 'sticker', rawType: 'sticker', text: null, media: { mediaId: '555', mimeType: 'image/webp', sha256: 'H' } },
      {
        ...base,
        providerMessageId: 'wamid.L1',
        timestamp: new Date(1750857388000),
        kind: 'location',
        rawType: 'location',
        text: null,
        location: { latitude: 37.483307, longitude: 122.148981, name: 'Main Street Beach', address: 'Main Street Beach, Santa Cruz, CA' },
      },
      { ...base, providerMessageId: 'wamid.U1', timestamp: new Date(1750857389000), kind: 'unsupported', rawType: 'unsupported', text: null },
      { ...base, providerMessageId: 'wamid.B1', timestamp: new Date(1750857390000), kind: 'unsupported', rawType: 'interactive', text: null },
      // An image without its media object is kept, not dropped, as unsupported.
      { ...base, providerMessageId: 'wamid.X1', timestamp: new Date(1750857391000), kind: 'unsupported', rawType: 'image', text: null },
    ]);
  });

  test('statuses, including a failure with errors and the echoed biz_opaque_callback_data', () => {
    const payload = wrap({
      statuses: [
        {
          id: 'wamid.S',
          status: 'sent',
          timestamp: '1750857384',
          recipient_id: '5516992318222',
          biz_opaque_callback_data: 'msg_abc',
          conversation: { id: 'a75d17ad06104c51166f948319b03c6a', expiration_timestamp: '1750943820', origin: { type: 'service' } },
          pricing: { billable: true, pricing_model: 'CBP', category: 'service' },
        },
        {
          id: 'wamid.F',
          status: 'failed',
          timestamp: '1750857399',
          recipient_id: '5516992318222',
          errors: [
            {
              code: 131026,
              title: 'Message undeliverable',
              message: 'Message undeliverable',
              error_data: { details: 'Receiver is incapable of receiving this message' },
              href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/',
            },
          ],
        },
        { id: 'wamid.W', status: 'warning', timestamp: '1750857399', recipient_id: '5516992318222' },
      ],
    });
    const { inbound, statuses, skipped } = parseWebhook(payload);
    expect(inbound).toEqual([]);
    expect(statuses).toEqual([
      { phoneNumberId: PHONE_ID, providerMessageId: 'wamid.S', status: 'sent', timestamp: new Date(1750857384000), recipient: '+5516992318222', clientMessageId: 'msg_abc' },
      {
        phoneNumberId: PHONE_ID,
        providerMessageId: 'wamid.F',
        status: 'failed',
        timestamp: new Date(1750857399000),
        recipient: '+5516992318222',
        error: '(#131026) Message undeliverable: Receiver is incapable of receiving this message',
        errorCode: 131026,
      },
    ]);
    // An unknown status value is reported, not thrown.
    expect(skipped).toEqual([{ where: 'entry[0].changes[0].value.statuses[2]', reason: expect.stringMatching(/^status:/) }]);
  });

  test('other fields are ignored; a malformed message is skipped; a foreign envelope throws', () => {
    const other = wrap({ event: 'APPROVED', message_template_id: 1 }, 'message_template_status_update');
    expect(parseWebhook(other)).toEqual({ inbound: [], statuses: [], skipped: [] });
    const bad = wrap({ messages: [{ id: 'wamid.NOFROM', timestamp: '1', type: 'text', text: { body: 'x' } }] });
    expect(parseWebhook(bad)).toMatchObject({ inbound: [], skipped: [{ where: 'entry[0].changes[0].value.messages[0]', reason: expect.stringMatching(/from/) }] });
    expect(() => parseWebhook({ object: 'page', entry: [] })).toThrow(WebhookPayloadError);
    expect(() => parseWebhook('nope')).toThrow(WebhookPayloadError);
  });

  test('statusSupersedes: statuses only move forward; failed is final', () => {
    expect(statusSupersedes(null, 'sent')).toBe(true);
    expect(statusSupersedes('sent', 'delivered')).toBe(true);
    expect(statusSupersedes('read', 'delivered')).toBe(false);
    expect(statusSupersedes('delivered', 'delivered')).toBe(false);
    expect(statusSupersedes('sent', 'failed')).toBe(true);
    expect(statusSupersedes('failed', 'read')).toBe(false);
  });
});

describe('CloudApiProvider.getPhoneNumber (GET /{phone-number-id})', () => {
  let owned: MsgappSandbox;
  let graph: CloudApiProvider;
  beforeAll(async () => {
    // No single token: each number belongs to the token registered with it, or to the first that uses it.
    owned = await startMsgappSandbox({ appSecret: APP_SECRET, numbers: [{ phoneNumberId: '2001', displayPhoneNumber: '+15550002001', accessToken: 'token-one' }] });
    graph = new CloudApiProvider({ baseUrl: owned.url, timeoutMs: 2_000 });
  });
  afterAll(async () => {
    await owned.close();
  });

  test("the owner's token sees the number; another token gets Graph's 100/33, not retryable", async () => {
    expect(await graph.getPhoneNumber('2001', 'token-one')).toEqual({ id: '2001', displayPhoneNumber: '+15550002001', verifiedName: 'Sandbox Business' });
    expect(await providerError(graph.getPhoneNumber('2001', 'token-two'))).toMatchObject({ status: 400, code: 100, retryable: false, graph: { subcode: 33 } });
  });

  test('an unknown number is owned by the first token that asks for it, in the sandbox; sends from it by another token are refused too', async () => {
    expect((await graph.getPhoneNumber('2002', 'token-two')).id).toBe('2002');
    expect(await providerError(graph.getPhoneNumber('2002', 'token-one'))).toMatchObject({ code: 100, graph: { subcode: 33 } });
    const send = graph.send({ phoneNumberId: '2002', accessToken: 'token-one', to: '+15557770000', content: { kind: 'text', text: 'hi' }, clientMessageId: 'msg_x' });
    expect(await providerError(send)).toMatchObject({ code: 100, retryable: false });
  });

  test('an answer about another object (a different id) is an invalid_response, never an ownership', async () => {
    const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: '9999', display_phone_number: '+1555' })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const other = new CloudApiProvider({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 2_000 });
    expect(await providerError(other.getPhoneNumber('2001', 'token-one'))).toMatchObject({ code: 'invalid_response', retryable: false });
    await new Promise((r) => server.close(r));
  });
});
