import { createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { signLink } from '../../domain/storage/signed-links';
import { userHash } from '../../domain/widget/sites';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { scanLogs, testLogDir, testLogFile } from '../support/secret-log';
import { startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';
import { multipart } from '../support/kb';
import { startTestWorker, type TestWorker } from '../support/temporal';

/**
 * "Secrets never leave", proven on its own: a flow that creates or presents every kind
 * of secret, with the app logging at info through the production logger options, and
 * then none of them in the log. (The global teardown runs the same scan over the whole
 * run's logs.)
 */
let db: TestDatabase;
let t: TestApp;
let receiver: HttpsReceiver;
/** The worker: widget uploads are extracted there, so a multipart upload runs its whole course. */
let tw: TestWorker;
const APP_SECRET = `appsecret-${randomBytes(12).toString('hex')}`;
const VERIFY_TOKEN = `verify-${randomBytes(12).toString('hex')}`;
const ORIGIN = 'https://shop.example';

beforeAll(async () => {
  db = await createTestDatabase();
  tw = await startTestWorker(db);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: VERIFY_TOKEN },
  });
  receiver = await startHttpsReceiver({ handler: (_req, res) => res.writeHead(200).end('ok') });
});
afterAll(async () => {
  await receiver.close();
  await t.close();
  await tw.close();
  await db.drop();
});

const logText = () => fs.readFileSync(testLogFile('app')!, 'utf8');
/** The secrets every process of the run recorded for the global scan (`kind<TAB>value` lines). */
const recordedSecrets = () =>
  fs
    .readdirSync(testLogDir()!)
    .filter((name) => name.endsWith('.tsv'))
    .map((name) => fs.readFileSync(path.join(testLogDir()!, name), 'utf8'))
    .join('');

describe('secrets never reach the logs', () => {
  test('keys, site secrets, whsec_, provider tokens, user_hash, conversation ids, media tokens and webhook credentials stay out of the log', async () => {
    expect(testLogDir()).not.toBeNull();
    const ws = await createWorkspace(db.orm);
    const { key } = await createKey(t.services, ws, ['webhooks:write', 'workflows:write', 'workflows:publish']);
    const auth = bearer(key);

    // A whsec_ secret, created through the API with an Idempotency-Key and replayed.
    const sub = { url: receiver.url, events: ['message.inbound'] };
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: { ...auth, 'idempotency-key': 'log-sub' }, payload: sub });
    expect(created.statusCode).toBe(201);
    await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: { ...auth, 'idempotency-key': 'log-sub' }, payload: sub });
    const whsec: string = created.json().secret;

    // A provider token, sealed as a credential.
    const providerToken = `EAAG${randomBytes(24).toString('hex')}`;
    await t.services.credentials.create(ws, 'msgapp_access_token', 'main number', providerToken);

    // A site and its secret; a verified visitor (user_hash in a body and in a query string).
    const agent = await t.app.inject({
      method: 'POST',
      url: '/api/v1/agents',
      headers: auth,
      payload: { name: 'Log agent', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN] } } },
    });
    await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
    const site = await t.services.sites.create(ws, agent.json().id, [ORIGIN]);
    const externalId = `visitor-${randomBytes(8).toString('hex')}`;
    const hash = userHash(site.site_secret, site.site_id, externalId);
    const widget = { 'x-concierge-site': site.site_id, origin: ORIGIN, cookie: `session=${randomBytes(8).toString('hex')}` };
    const init = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: widget, payload: { user_context: { external_id: externalId, user_hash: hash } } });
    expect(init.json().auth_level).toBe('verified');
    const conversationId: string = init.json().conversation_id;
    const listed = await t.app.inject({ method: 'GET', url: `/api/public/widget/conversations?external_id=${externalId}&user_hash=${hash}`, headers: widget });
    expect(listed.statusCode).toBe(200);
    // A verified visitor's conversation answers only with the identity: in the query string here.
    const history = `/api/public/widget/history?conversation_id=${conversationId}&external_id=${externalId}&user_hash=${hash}`;
    expect((await t.app.inject({ method: 'GET', url: history, headers: widget })).statusCode).toBe(200);
    // Not a credential for this route, but a wrong spelling must not leak it either.
    await t.app.inject({ method: 'GET', url: `/api/public/widget/tasks?Conversation_Id=${conversationId}`, headers: widget });

    // The provider's handshake token, a signed notification, a signed media link.
    const handshake = await t.app.inject({ method: 'GET', url: `/webhooks/msgapp?hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=42` });
    expect(handshake.body).toBe('42');
    const body = JSON.stringify({ object: 'whatsapp_business_account', entry: [] });
    const signature = `sha256=${createHmac('sha256', APP_SECRET).update(body).digest('hex')}`;
    await t.app.inject({ method: 'POST', url: '/webhooks/msgapp', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature }, payload: body });
    const blob = await t.services.blobs.commit(await t.services.blobs.stage(Readable.from([Buffer.from('picture bytes')]), 1024));
    // Links are absolute (PUBLIC_BASE_URL); inject takes the path.
    const media = new URL(signLink(t.services.box, 'http://127.0.0.1:3000', { sha256: blob, mime: 'image/png' })).pathname;
    expect((await t.app.inject({ method: 'GET', url: media })).statusCode).toBe(200);
    // A refused key is still a key someone holds.
    await t.app.inject({ method: 'GET', url: '/api/v1/agents', headers: bearer(`sk_${'f'.repeat(64)}`) });

    const log = logText();
    // The requests were logged, with what they asked for still readable.
    expect(log).toContain('"url":"/api/media/[redacted]"');
    expect(log).toContain(`"url":"/api/public/widget/conversations?external_id=[redacted]&user_hash=[redacted]"`);
    expect(log).toContain(`"url":"/api/public/widget/history?conversation_id=[redacted]&external_id=[redacted]&user_hash=[redacted]"`);
    expect(log).toContain('"url":"/webhooks/msgapp?hub.mode=subscribe&hub.verify_token=[redacted]&hub.challenge=42"');
    const secrets: Record<string, string> = {
      'API key': key,
      'refused API key': `sk_${'f'.repeat(64)}`,
      'webhook secret': whsec,
      'provider token': providerToken,
      'site secret': site.site_secret,
      user_hash: hash,
      external_id: externalId,
      conversation_id: conversationId,
      'media token': media.slice('/api/media/'.length),
      'X-Hub-Signature-256': signature.slice('sha256='.length),
      'msgapp app secret': APP_SECRET,
      'hub.verify_token': VERIFY_TOKEN,
      cookie: widget.cookie.slice('session='.length),
    };
    const leaked = Object.entries(secrets)
      .filter(([, value]) => log.includes(value))
      .map(([kind]) => kind);
    expect(leaked).toEqual([]);
    // The run-wide scan sees what this test recorded, and finds nothing either.
    expect(scanLogs(testLogDir()!)).toEqual([]);
  });
  test('a user_hash sent only as a multipart form field (upload) is known to the run-wide scan, and stays out of the log', async () => {
    const ws = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const agent = await t.app.inject({
      method: 'POST',
      url: '/api/v1/agents',
      headers: auth,
      payload: { name: 'Upload agent', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN], file_upload: true } } },
    });
    await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
    const site = await t.services.sites.create(ws, agent.json().id, [ORIGIN]);
    const externalId = `uploader-${randomBytes(8).toString('hex')}`;
    const hash = userHash(site.site_secret, site.site_id, externalId);
    // The form's fields are read by the handler, after every request hook: only the identity check sees the hash.
    const form = multipart([
      { name: 'external_id', value: externalId },
      { name: 'user_hash', value: hash },
      { name: 'file', value: 'Delivery instructions: leave it with the neighbour.', filename: 'note.txt' },
    ]);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/public/widget/upload',
      headers: { 'x-concierge-site': site.site_id, origin: ORIGIN, ...form.headers },
      payload: form.payload,
    });
    expect(res.statusCode).toBe(201);
    expect(recordedSecrets()).toContain(`user_hash\t${hash}\n`);
    expect(logText()).not.toContain(hash);
    expect(scanLogs(testLogDir()!)).toEqual([]);
  });
});
