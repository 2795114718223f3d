import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { CloudApiProvider, parseWebhook, statusSupersedes, verifyHubSignature, type DeliveryStatus, type StatusUpdate } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, startWebhookRecorder, verifyWebhookHandshake, type MsgappSandbox, type RecordedHit, type WebhookRecorder } from '../../dev/fake-msgapp';

const APP_SECRET = 'sandbox-secret';
const PHONE_ID = '106540352242922';
const DISPLAY = '15550783881';

let sandbox: MsgappSandbox;
let receiver: WebhookRecorder;
let provider: CloudApiProvider;

beforeAll(async () => {
  receiver = await startWebhookRecorder({ verifyToken: 'verify-me' });
  sandbox = await startMsgappSandbox({
    appSecret: APP_SECRET,
    webhookUrl: receiver.url,
    statusDelaysMs: { delivered: 20, read: 40 },
    numbers: [{ phoneNumberId: PHONE_ID, displayPhoneNumber: DISPLAY }],
  });
  provider = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 2_000 });
});

afterEach(async () => {
  await sandbox.idle();
  sandbox.scenario({});
});

afterAll(async () => {
  await sandbox?.close();
  await receiver?.close();
});

const send = (text = 'hello', clientMessageId = `msg_${Math.random().toString(16).slice(2)}`) =>
  provider.send({ phoneNumberId: PHONE_ID, accessToken: 'any', to: '+15551230000', content: { kind: 'text', text }, clientMessageId });

/** The status callbacks for one wamid, in arrival order, each checked for a valid signature. */
function statusesFor(hits: RecordedHit[], wamid: string): StatusUpdate[] {
  const out: StatusUpdate[] = [];
  for (const h of hits) {
    const parsed = parseWebhook(JSON.parse(h.rawBody.toString('utf8')));
    for (const s of parsed.statuses) {
      if (s.providerMessageId !== wamid) continue;
      expect(verifyHubSignature(h.rawBody, h.headers['x-hub-signature-256'] as string, APP_SECRET)).toBe(true);
      out.push(s);
    }
  }
  return out;
}

const waitForStatuses = async (wamid: string, count: number) => {
  const hits = await receiver.waitFor((posts) => posts.filter((h) => h.rawBody.includes(wamid)).length >= count);
  return statusesFor(hits, wamid);
};

describe('status callbacks', () => {
  test('arrive signed, in order sent → delivered → read, as Cloud API statuses payloads', async () => {
    const { providerMessageId } = await send('hello', 'msg_order');
    const statuses = await waitForStatuses(providerMessageId, 3);
    expect(statuses.map((s) => s.status)).toEqual(['sent', 'delivered', 'read']);
    expect(statuses.every((s) => s.clientMessageId === 'msg_order' && s.recipient === '+15551230000' && s.phoneNumberId === PHONE_ID)).toBe(true);

    const hit = receiver.posts().find((h) => h.rawBody.includes(providerMessageId))!;
    expect(hit.headers['content-type']).toBe('application/json');
    expect(hit.headers['x-hub-signature-256']).toMatch(/^sha256=[0-9a-f]{64}$/);
    const raw = JSON.parse(hit.rawBody.toString());
    expect(raw).toEqual({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: expect.any(String),
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: DISPLAY, phone_number_id: PHONE_ID },
                statuses: [
                  {
                    id: providerMessageId,
                    status: 'sent',
                    timestamp: expect.stringMatching(/^\d{10}$/),
                    recipient_id: '15551230000',
                    biz_opaque_callback_data: 'msg_order',
                    pricing: expect.objectContaining({ pricing_model: 'PMP' }),
                  },
                ],
              },
            },
          ],
        },
      ],
    });

    // The signature covers the raw bytes: one changed byte and it no longer verifies.
    const tampered = Buffer.from(hit.rawBody.toString().replace('"sent"', '"read"'));
    expect(verifyHubSignature(tampered, hit.headers['x-hub-signature-256'] as string, APP_SECRET)).toBe(false);
    expect(verifyHubSignature(hit.rawBody, hit.headers['x-hub-signature-256'] as string, 'another-secret')).toBe(false);
  });

  test('failNext delivery: sent, then failed with an errors array', async () => {
    sandbox.failNext({ kind: 'delivery', error: 'Message undeliverable' });
    const failing = await send('will fail');
    const fine = await send('will arrive');
    const statuses = await waitForStatuses(failing.providerMessageId, 2);
    expect(statuses.map((s) => s.status)).toEqual(['sent', 'failed']);
    expect(statuses[1]).toMatchObject({ errorCode: 131026, error: '(#131026) Message undeliverable' });
    const raw = receiver.posts().find((h) => h.rawBody.includes('"failed"') && h.rawBody.includes(failing.providerMessageId))!;
    expect(JSON.parse(raw.rawBody.toString()).entry[0].changes[0].value.statuses[0].errors).toEqual([
      { code: 131026, title: 'Message undeliverable', message: 'Message undeliverable', error_data: { details: 'Message undeliverable' }, href: expect.any(String) },
    ]);
    // Only the next message: the one after it is delivered and read.
    expect((await waitForStatuses(fine.providerMessageId, 3)).map((s) => s.status)).toEqual(['sent', 'delivered', 'read']);
  });

  test('out of order: read arrives before delivered; statusSupersedes still ends at read', async () => {
    sandbox.scenario({ outOfOrder: true });
    const { providerMessageId } = await send();
    const statuses = await waitForStatuses(providerMessageId, 3);
    expect(statuses.map((s) => s.status)).toEqual(['sent', 'read', 'delivered']);
    const final = statuses.reduce<DeliveryStatus | null>((cur, s) => (statusSupersedes(cur, s.status) ? s.status : cur), null);
    expect(final).toBe('read');
  });

  test('duplicates: every callback is POSTed twice with identical bytes and signature', async () => {
    sandbox.scenario({ duplicates: true });
    const { providerMessageId } = await send();
    await waitForStatuses(providerMessageId, 6);
    const hits = receiver.posts().filter((h) => h.rawBody.includes(providerMessageId));
    expect(hits).toHaveLength(6);
    expect(statusesFor(hits, providerMessageId).map((s) => s.status)).toEqual(['sent', 'sent', 'delivered', 'delivered', 'read', 'read']);
    for (let i = 0; i < 6; i += 2) {
      expect(hits[i].rawBody.equals(hits[i + 1].rawBody)).toBe(true);
      expect(hits[i].headers['x-hub-signature-256']).toBe(hits[i + 1].headers['x-hub-signature-256']);
    }
  });

  test('a webhook answering 500 is retried', async () => {
    receiver.respondWith(500);
    const { providerMessageId } = await send();
    await waitForStatuses(providerMessageId, 4); // sent twice (500, then 200), delivered, read
    const attempts = sandbox.callbacks.filter((c) => c.body.includes(providerMessageId) && c.body.includes('"sent"'));
    expect(attempts.map((a) => [a.attempt, a.status])).toEqual([
      [1, 500],
      [2, 200],
    ]);
  });
});

describe('inbound', () => {
  test('text: a signed messages webhook with contacts and profile name', async () => {
    const before = receiver.posts().length;
    const { providerMessageId, webhookStatus } = await sandbox.injectInbound({ from: '+15551230000', to: PHONE_ID, text: 'Where is my order?', profileName: 'Ada Lovelace' });
    expect(webhookStatus).toBe(200);
    const hit = receiver.posts()[before];
    expect(verifyHubSignature(hit.rawBody, hit.headers['x-hub-signature-256'] as string, APP_SECRET)).toBe(true);
    const value = JSON.parse(hit.rawBody.toString()).entry[0].changes[0].value;
    expect(value.contacts).toEqual([{ profile: { name: 'Ada Lovelace' }, wa_id: '15551230000' }]);
    expect(value.messages).toEqual([{ from: '15551230000', id: providerMessageId, timestamp: expect.stringMatching(/^\d+$/), type: 'text', text: { body: 'Where is my order?' } }]);
    expect(parseWebhook(JSON.parse(hit.rawBody.toString())).inbound).toEqual([
      {
        phoneNumberId: PHONE_ID,
        displayPhoneNumber: DISPLAY,
        from: '+15551230000',
        profileName: 'Ada Lovelace',
        providerMessageId,
        timestamp: expect.any(Date),
        kind: 'text',
        rawType: 'text',
        text: 'Where is my order?',
      },
    ]);
  });

  test('addressed by display number, or to a number the sandbox has not seen', async () => {
    const before = receiver.posts().length;
    await sandbox.injectInbound({ from: '+15551230000', to: `+${DISPLAY}`, text: 'by display number' });
    await sandbox.injectInbound({ from: '+15551230000', to: '987654321098765', text: 'new number' });
    const [a, b] = receiver.posts().slice(before).map((h) => parseWebhook(JSON.parse(h.rawBody.toString())).inbound[0]);
    expect(a).toMatchObject({ phoneNumberId: PHONE_ID, displayPhoneNumber: DISPLAY });
    expect(b).toMatchObject({ phoneNumberId: '987654321098765', displayPhoneNumber: expect.stringMatching(/^1555\d{7}$/) });
  });

  test('media: the webhook names a media id; downloadMedia returns the exact bytes', async () => {
    const bytes = Buffer.concat([Buffer.from('OggS'), Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31) % 256))]);
    const before = receiver.posts().length;
    const { mediaId } = await sandbox.injectInbound({ from: '+447700900123', to: PHONE_ID, media: { kind: 'voice', mimeType: 'audio/ogg; codecs=opus', bytes } });
    const msg = parseWebhook(JSON.parse(receiver.posts()[before].rawBody.toString())).inbound[0];
    expect(msg).toMatchObject({ kind: 'voice', rawType: 'audio', from: '+447700900123', media: { mediaId, mimeType: 'audio/ogg; codecs=opus' } });
    const got = await provider.downloadMedia(msg.media!.mediaId, 'any');
    expect(got.mimeType).toBe('audio/ogg; codecs=opus');
    expect(got.bytes.equals(bytes)).toBe(true);

    // The metadata is the Graph shape, with a url back at the sandbox.
    const meta = await (await fetch(`${sandbox.url}/${mediaId}`)).json();
    expect(meta).toEqual({ messaging_product: 'whatsapp', url: `${sandbox.origin}/media-bytes/${mediaId}`, mime_type: 'audio/ogg; codecs=opus', sha256: expect.stringMatching(/^[0-9a-f]{64}$/), file_size: bytes.length, id: mediaId });
  });

  test('image with caption, location and unsupported reach parseWebhook as such', async () => {
    const before = receiver.posts().length;
    await sandbox.injectInbound({ from: '+15551230000', to: PHONE_ID, text: 'the receipt', media: { kind: 'image', mimeType: 'image/jpeg', bytes: Buffer.from([0xff, 0xd8, 0xff]) } });
    await sandbox.injectInbound({ from: '+15551230000', to: PHONE_ID, location: { latitude: 51.5, longitude: -0.12, name: 'Office' } });
    await sandbox.injectInbound({ from: '+15551230000', to: PHONE_ID, unsupported: true });
    const msgs = receiver
      .posts()
      .slice(before)
      .map((h) => parseWebhook(JSON.parse(h.rawBody.toString())).inbound[0]);
    expect(msgs.map((m) => [m.kind, m.text])).toEqual([
      ['image', 'the receipt'],
      ['location', null],
      ['unsupported', null],
    ]);
    expect(msgs[1].location).toEqual({ latitude: 51.5, longitude: -0.12, name: 'Office' });
  });

  test('without a webhook URL, injectInbound refuses', async () => {
    const lonely = await startMsgappSandbox({ appSecret: APP_SECRET });
    try {
      await expect(lonely.injectInbound({ from: '+15551230000', to: PHONE_ID, text: 'x' })).rejects.toThrow(/no webhook URL/);
    } finally {
      await lonely.close();
    }
  });
});

describe('Graph API emulation', () => {
  const post = async (body: unknown, route = `${sandbox.url}/${PHONE_ID}/messages`) => {
    const res = await fetch(route, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as { error?: { message: string; code: number; type: string; fbtrace_id: string } } & Record<string, unknown> };
  };

  test.each([
    ['no messaging_product', { to: '15551230000', type: 'text', text: { body: 'x' } }, /messaging_product is required/],
    ['another messaging_product', { messaging_product: 'sms', to: '15551230000', type: 'text', text: { body: 'x' } }, /messaging_product must be one of/],
    ['no to', { messaging_product: 'whatsapp', type: 'text', text: { body: 'x' } }, /parameter to is required/],
    ['a to that is no number', { messaging_product: 'whatsapp', to: 'someone', type: 'text', text: { body: 'x' } }, /Invalid parameter/],
    ['an unknown type', { messaging_product: 'whatsapp', to: '15551230000', type: 'fax', fax: {} }, /type must be one of/],
    ['no object for the type', { messaging_product: 'whatsapp', to: '15551230000', type: 'image', text: { body: 'x' } }, /parameter image is required/],
    ['both link and id', { messaging_product: 'whatsapp', to: '15551230000', type: 'image', image: { link: 'x', id: '1' } }, /exactly one of/],
    ['a caption on audio', { messaging_product: 'whatsapp', to: '15551230000', type: 'audio', audio: { link: 'https://a/b.ogg', caption: 'no' } }, /caption'\] is not allowed/],
    ['a latitude out of range', { messaging_product: 'whatsapp', to: '15551230000', type: 'location', location: { latitude: 91, longitude: 0 } }, /latitude/],
    ['a template without language', { messaging_product: 'whatsapp', to: '15551230000', type: 'template', template: { name: 'x' } }, /language'\]\['code'\] is required/],
    ['a text over 4096 characters', { messaging_product: 'whatsapp', to: '15551230000', type: 'text', text: { body: 'x'.repeat(4097) } }, /4096/],
    ['a body that is not JSON', '{not json', /.+/],
  ])('400 with a Graph error body for %s', async (_label, body, message) => {
    const before = sandbox.sent.length;
    const { status, json } = await post(body);
    expect(status).toBe(400);
    expect(json.error).toEqual(expect.objectContaining({ message: expect.stringMatching(message), type: 'OAuthException', code: 100, fbtrace_id: expect.any(String) }));
    expect(sandbox.sent).toHaveLength(before);
  });

  test('the real response shape; type defaults to text; with or without a version prefix', async () => {
    const { status, json } = await post({ messaging_product: 'whatsapp', to: '+1 (555) 123-0000', text: { body: 'no type' } }, `${sandbox.origin}/${PHONE_ID}/messages`);
    expect(status).toBe(200);
    expect(json).toEqual({ messaging_product: 'whatsapp', contacts: [{ input: '+1 (555) 123-0000', wa_id: '15551230000' }], messages: [{ id: expect.stringMatching(/^wamid\./) }] });
    const tpl = await post({ messaging_product: 'whatsapp', to: '15551230000', type: 'template', template: { name: 'hello_world', language: { code: 'en_US' } } }, `${sandbox.origin}/v19.0/${PHONE_ID}/messages`);
    expect(tpl.json.messages).toEqual([{ id: expect.stringMatching(/^wamid\./), message_status: 'accepted' }]);
    const unknown = await post({}, `${sandbox.url}/a/b/c`);
    expect(unknown).toMatchObject({ status: 400, json: { error: { code: 2500 } } });
  });
});

describe('control API, handshake helper and CLI', () => {
  test('POST /_sandbox/inbound (media as base64) and GET /_sandbox/sent', async () => {
    const bytes = Buffer.from('%PDF-1.4 tiny');
    const res = await fetch(`${sandbox.origin}/_sandbox/inbound`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ from: '+15551230000', to: PHONE_ID, text: 'see attached', media: { kind: 'document', mimeType: 'application/pdf', base64: bytes.toString('base64'), filename: 'a.pdf' } }),
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as { providerMessageId: string; mediaId: string; webhookStatus: number };
    expect(out).toEqual({ providerMessageId: expect.stringMatching(/^wamid\./), mediaId: expect.stringMatching(/^\d+$/), webhookStatus: 200 });
    expect((await provider.downloadMedia(out.mediaId, 'any')).bytes.equals(bytes)).toBe(true);

    const bad = await fetch(`${sandbox.origin}/_sandbox/inbound`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ from: '+1' }) });
    expect(bad.status).toBe(400);

    const { providerMessageId } = await send('listed');
    const sent = (await (await fetch(`${sandbox.origin}/_sandbox/sent`)).json()) as { sent: Array<{ providerMessageId: string; body: { text?: { body: string } }; at: string }> };
    expect(sent.sent.find((s) => s.providerMessageId === providerMessageId)).toMatchObject({ body: { text: { body: 'listed' } }, at: expect.any(String) });
  });

  test('verifyWebhookHandshake checks the echoed challenge', async () => {
    await expect(verifyWebhookHandshake(receiver.url, 'verify-me')).resolves.toMatchObject({ ok: true, status: 200 });
    await expect(verifyWebhookHandshake(receiver.url, 'wrong')).resolves.toMatchObject({ ok: false, status: 403 });
    const get = receiver.hits.filter((h) => h.method === 'GET').at(-1)!;
    expect(get.url).toMatch(/hub\.mode=subscribe&hub\.verify_token=wrong&hub\.challenge=\d+/);
  });

  test('dev/fake-msgapp/main.ts inbound posts to a running sandbox; usage errors exit 2', async () => {
    const run = promisify(execFile);
    const bin = path.join(__dirname, '../../dev/fake-msgapp/main.ts');
    const args = ['--import', 'tsx', bin];
    const before = receiver.posts().length;
    const [ok, bad] = await Promise.allSettled([
      run(process.execPath, [...args, 'inbound', '--sandbox', sandbox.url, '--from', '+15551230000', '--to', PHONE_ID, '--text', 'hi from the CLI'], { timeout: 10_000 }),
      run(process.execPath, [...args, 'inbound', '--sandbox', sandbox.url, '--from', '+15551230000'], { timeout: 10_000 }),
    ]);
    if (ok.status === 'rejected') throw ok.reason;
    expect(JSON.parse(ok.value.stdout)).toEqual({ providerMessageId: expect.stringMatching(/^wamid\./), webhookStatus: 200 });
    const texts = receiver
      .posts()
      .slice(before)
      .flatMap((h) => parseWebhook(JSON.parse(h.rawBody.toString())).inbound.map((m) => m.text));
    expect(texts).toContain('hi from the CLI');
    expect(bad.status).toBe('rejected');
    const err = (bad as PromiseRejectedResult).reason as { code: number; stderr: string; stdout: string };
    expect(err.code).toBe(2);
    expect(err.stderr).toMatch(/missing --to/);
    expect(err.stdout).toBe('');
  }, 20_000);
});
