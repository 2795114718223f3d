import { createHash } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { signHubPayload } from '../../providers/msgapp/webhook';
import { GraphError, defaultSendFailure, digitsOf, invalidParam, invalidToken, newMediaId, newWamid, validateSend } from './graph';

export { verifyWebhookHandshake, type HandshakeResult } from './handshake';
export { startWebhookRecorder, type RecordedHit, type WebhookRecorder } from './recorder';

/**
 * An emulator of the parts of the WhatsApp Cloud API (Graph API) msgapp uses, for the
 * embedded default, demos and tests:
 *
 *   POST /{phone_number_id}/messages   validated like the real API; answers with a wamid,
 *                                      then POSTs signed `statuses` callbacks
 *   GET  /{media_id}                   media metadata, `url` pointing back here
 *   GET  /{phone_number_id}            the number (id, display_phone_number, verified_name;
 *                                      an unknown id when `fields` names display_phone_number),
 *                                      only for the access token that owns it: a number is
 *                                      owned by the token registered with it, else by the
 *                                      first token that uses it; any other token gets Graph's
 *                                      "does not exist ... missing permissions" (100/33)
 *   GET  /{waba_id}/phone_numbers      the business account's numbers the token may use (those it
 *                                      owns and those no token owns yet), Graph's `{data, paging}`
 *                                      with `limit` / `after` cursors and `fields` selection; any
 *                                      other account id is Graph's "does not exist" (100/33)
 *   GET  /media-bytes/{media_id}       the bytes
 *
 * Paths may carry a Graph version prefix (`/v21.0/...`), which is ignored; `url` includes
 * one so it can be used as MSGAPP_API_BASE unchanged.
 *
 * Control API (no auth: bind it to loopback):
 *   POST /_sandbox/inbound    {from, to, text?, profileName?, media?: {kind, mimeType, base64, filename?}, location?, unsupported?}
 *   GET  /_sandbox/sent       {sent: [...]}
 *   POST /_sandbox/fail-next  {kind: 'send', status, code?, message?} | {kind: 'delivery', error, code?}
 *   POST /_sandbox/scenario   {outOfOrder?, duplicates?}
 *   PUT  /_sandbox/webhook    {url}
 */

export type SandboxMediaKind = 'image' | 'audio' | 'video' | 'document' | 'sticker' | 'voice';

export interface MsgappSandboxOptions {
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Signs every callback (X-Hub-Signature-256). */
  appSecret: string;
  /** Where callbacks are POSTed: our /webhooks/msgapp. Callbacks are dropped while unset. */
  webhookUrl?: string;
  /** Offsets from acceptance; default 300 and 600 ms. */
  statusDelaysMs?: { delivered: number; read: number };
  /** When set, every Graph call must carry `Authorization: Bearer <accessToken>`. */
  accessToken?: string;
  /** Known business numbers (with the access token that owns each); others are registered on first use. */
  numbers?: Array<{ phoneNumberId: string; displayPhoneNumber: string; accessToken?: string }>;
  /** The WhatsApp Business Account id in `entry[].id`. */
  businessAccountId?: string;
  /** The version segment of `url`; default v21.0. */
  apiVersion?: string;
  /** Attempts per callback when the webhook does not answer 2xx; default 3. */
  webhookAttempts?: number;
  logger?: boolean;
}

export interface SentRecord {
  phoneNumberId: string;
  /** The request body exactly as received (parsed JSON). */
  body: Record<string, unknown>;
  providerMessageId: string;
  at: Date;
}

export interface CallbackRecord {
  url: string;
  kind: 'status' | 'inbound';
  /** The exact bytes POSTed (what the signature covers). */
  body: string;
  attempt: number;
  /** HTTP status, null when the request failed. */
  status: number | null;
  error?: string;
  at: Date;
}

export type FailNextOptions =
  | { kind: 'send'; status: number; code?: number; message?: string }
  | { kind: 'delivery'; error: string; code?: number };

export interface ScenarioOptions {
  /** read is reported before delivered. */
  outOfOrder?: boolean;
  /** Every callback is POSTed twice. */
  duplicates?: boolean;
}

export interface InjectInboundOptions {
  /** The customer, E.164. */
  from: string;
  /** The business number: a phone_number_id or the display number. */
  to: string;
  /** The text, or the caption of media. */
  text?: string;
  media?: { mimeType: string; bytes: Buffer; filename?: string; kind: SandboxMediaKind };
  location?: { latitude: number; longitude: number; name?: string; address?: string };
  /** A message type WhatsApp cannot pass on (type `unsupported`, as the real API reports it). */
  unsupported?: boolean;
  profileName?: string;
  /** wamid of the message this one replies to. */
  replyTo?: string;
}

export interface InjectInboundResult {
  providerMessageId: string;
  mediaId?: string;
  /** Our webhook's answer to the last attempt; null when it could not be reached. */
  webhookStatus: number | null;
}

export interface MsgappSandbox {
  /** Base URL to use as MSGAPP_API_BASE, e.g. http://127.0.0.1:4010/v21.0 */
  url: string;
  /** Origin of the server (control API, media bytes). */
  origin: string;
  /** The WhatsApp Business Account id (callbacks' `entry[].id`, `GET /{waba_id}/phone_numbers`). */
  businessAccountId: string;
  sent: SentRecord[];
  callbacks: CallbackRecord[];
  setWebhookUrl(url: string | undefined): void;
  failNext(opts: FailNextOptions): void;
  /** Replaces the current scenario; `scenario({})` restores the normal one. */
  scenario(opts: ScenarioOptions): void;
  /** `accessToken`: the only token that may use the number (unset: the first token that does). */
  registerNumber(phoneNumberId: string, displayPhoneNumber: string, accessToken?: string): void;
  injectInbound(opts: InjectInboundOptions): Promise<InjectInboundResult>;
  /** Resolves when every scheduled status callback has been POSTed (or the sandbox closed). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

interface StoredMedia {
  bytes: Buffer;
  mimeType: string;
  sha256: string;
  filename?: string;
}

interface Number_ {
  phoneNumberId: string;
  displayPhoneNumber: string;
  /** The access token that owns the number. */
  owner?: string;
}

const DEFAULT_DELAYS = { delivered: 300, read: 600 };
const CALLBACK_TIMEOUT_MS = 5_000;
const RETRY_WAITS_MS = [100, 400, 1_000, 2_000];

const unix = () => String(Math.floor(Date.now() / 1000));

export async function startMsgappSandbox(opts: MsgappSandboxOptions): Promise<MsgappSandbox> {
  if (!opts.appSecret) throw new Error('startMsgappSandbox: appSecret is required');
  const host = opts.host ?? '127.0.0.1';
  const delays = opts.statusDelaysMs ?? DEFAULT_DELAYS;
  const apiVersion = opts.apiVersion ?? 'v21.0';
  const wabaId = opts.businessAccountId ?? '100000000000001';
  const attempts = Math.max(1, opts.webhookAttempts ?? 3);

  let webhookUrl = opts.webhookUrl;
  let scenario: Required<ScenarioOptions> = { outOfOrder: false, duplicates: false };
  let closed = false;
  const sendFailures: Array<Extract<FailNextOptions, { kind: 'send' }>> = [];
  const deliveryFailures: Array<Extract<FailNextOptions, { kind: 'delivery' }>> = [];
  const sent: SentRecord[] = [];
  const callbacks: CallbackRecord[] = [];
  const media = new Map<string, StoredMedia>();
  const numbers: Number_[] = (opts.numbers ?? []).map((n) => ({ phoneNumberId: n.phoneNumberId, displayPhoneNumber: digitsOf(n.displayPhoneNumber), owner: n.accessToken }));
  const pending = new Set<Promise<void>>();
  const timers = new Map<NodeJS.Timeout, () => void>();
  const aborter = new AbortController();
  let origin = ''; // http://host:port, known once listening

  // --- helpers -------------------------------------------------------------------------

  /** A wait that close() cuts short. */
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (closed) return resolve();
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, Math.max(0, ms));
      timers.set(t, resolve);
    });

  const track = (p: Promise<void>) => {
    const wrapped = p.catch(() => undefined).finally(() => pending.delete(wrapped));
    pending.add(wrapped);
  };

  function resolveNumber(toOrId: string): Number_ {
    const digits = digitsOf(toOrId);
    const found = numbers.find((n) => n.phoneNumberId === toOrId) ?? numbers.find((n) => digits !== '' && digitsOf(n.displayPhoneNumber) === digits);
    if (found) return found;
    const hash = createHash('sha256').update(toOrId).digest();
    const hashDigits = (len: number) => Array.from(hash.subarray(0, len), (b) => String(b % 10)).join('');
    const n: Number_ = toOrId.startsWith('+')
      ? { phoneNumberId: `1${hashDigits(14)}`, displayPhoneNumber: digits }
      : { phoneNumberId: toOrId, displayPhoneNumber: `1555${hashDigits(7)}` };
    numbers.push(n);
    return n;
  }

  const envelope = (n: Number_, value: Record<string, unknown>) => ({
    object: 'whatsapp_business_account',
    entry: [
      {
        id: wabaId,
        changes: [
          {
            value: { messaging_product: 'whatsapp', metadata: { display_phone_number: n.displayPhoneNumber, phone_number_id: n.phoneNumberId }, ...value },
            field: 'messages',
          },
        ],
      },
    ],
  });

  /** POSTs one signed callback, retrying a non-2xx or unreachable webhook. Returns the last status. */
  async function deliver(kind: CallbackRecord['kind'], payload: unknown): Promise<number | null> {
    const url = webhookUrl;
    if (!url || closed) return null;
    const body = JSON.stringify(payload);
    const signature = signHubPayload(body, opts.appSecret);
    let last: number | null = null;
    for (let attempt = 1; attempt <= attempts && !closed; attempt++) {
      const record: CallbackRecord = { url, kind, body, attempt, status: null, at: new Date() };
      callbacks.push(record);
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': signature, 'User-Agent': 'facebookexternalua' },
          body,
          signal: AbortSignal.any([aborter.signal, AbortSignal.timeout(CALLBACK_TIMEOUT_MS)]),
        });
        await res.arrayBuffer().catch(() => undefined);
        record.status = res.status;
        last = res.status;
        if (res.ok) return last;
      } catch (err) {
        record.error = err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
        last = null;
      }
      if (attempt < attempts) await sleep(RETRY_WAITS_MS[Math.min(attempt - 1, RETRY_WAITS_MS.length - 1)]);
    }
    return last;
  }

  function statusPayload(
    n: Number_,
    m: { id: string; recipient: string; opaque?: string; template: boolean },
    status: 'sent' | 'delivered' | 'read' | 'failed',
    errors?: unknown[],
  ) {
    const st: Record<string, unknown> = { id: m.id, status, timestamp: unix(), recipient_id: m.recipient };
    if (m.opaque !== undefined) st.biz_opaque_callback_data = m.opaque;
    if (status === 'sent' || status === 'delivered') {
      st.pricing = m.template
        ? { billable: true, pricing_model: 'PMP', type: 'regular', category: 'utility' }
        : { billable: false, pricing_model: 'PMP', type: 'free_customer_service', category: 'service' };
    }
    if (errors) st.errors = errors;
    return envelope(n, { statuses: [st] });
  }

  /** sent → delivered → read (or a scenario's variant), each POSTed after the previous one. */
  async function runStatuses(n: Number_, m: { id: string; recipient: string; opaque?: string; template: boolean }): Promise<void> {
    const started = Date.now();
    const failure = deliveryFailures.shift();
    const { outOfOrder, duplicates } = scenario;
    type Step = { at: number; status: 'sent' | 'delivered' | 'read' | 'failed'; errors?: unknown[] };
    let steps: Step[];
    if (failure) {
      const code = failure.code ?? 131026;
      const errors = [
        {
          code,
          title: failure.error,
          message: failure.error,
          error_data: { details: failure.error },
          href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/',
        },
      ];
      steps = [
        { at: 0, status: 'sent' },
        { at: delays.delivered, status: 'failed', errors },
      ];
    } else if (outOfOrder) {
      steps = [
        { at: 0, status: 'sent' },
        { at: delays.delivered, status: 'read' },
        { at: Math.max(delays.read, delays.delivered), status: 'delivered' },
      ];
    } else {
      steps = [
        { at: 0, status: 'sent' },
        { at: delays.delivered, status: 'delivered' },
        { at: Math.max(delays.read, delays.delivered), status: 'read' },
      ];
    }
    await sleep(0); // after the send's HTTP response
    for (const step of steps) {
      await sleep(started + step.at - Date.now());
      if (closed) return;
      const payload = statusPayload(n, m, step.status, step.errors);
      await deliver('status', payload);
      if (duplicates) await deliver('status', payload);
    }
  }

  /** The bearer token of a Graph call (checked against `accessToken` when one is set). */
  function checkBearer(req: FastifyRequest): string | undefined {
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
    if (opts.accessToken === undefined) return m?.[1];
    if (!m || m[1] !== opts.accessToken) throw invalidToken();
    return m[1];
  }

  /** What Graph answers a token that does not own the object: it does not say whether the object exists. */
  const noSuchObject = (method: 'get' | 'post', id: string) =>
    new GraphError(
      400,
      100,
      `Unsupported ${method} request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
      { subcode: 33, type: 'GraphMethodException' },
    );

  /** A number used with a token: the first token to use an unowned number owns it; any other is refused. */
  function ownNumber(n: Number_, token: string | undefined, method: 'get' | 'post'): void {
    if (token === undefined) return;
    n.owner ??= token;
    if (n.owner !== token) throw noSuchObject(method, n.phoneNumberId);
  }

  async function injectInbound(o: InjectInboundOptions): Promise<InjectInboundResult> {
    if (!webhookUrl) throw new Error('the sandbox has no webhook URL to deliver to (setWebhookUrl)');
    const contentCount = [o.media, o.location, o.unsupported ? true : undefined].filter((x) => x !== undefined).length;
    if (contentCount > 1) throw new Error('give at most one of media, location, unsupported');
    if (contentCount === 0 && (o.text === undefined || o.text === '')) throw new Error('give text, media, location or unsupported');
    const from = digitsOf(o.from);
    if (from.length < 6) throw new Error(`from: "${o.from}" is not a phone number`);
    const n = resolveNumber(o.to);
    const id = newWamid();
    const message: Record<string, unknown> = { from, id, timestamp: unix() };
    if (o.replyTo) message.context = { from: digitsOf(n.displayPhoneNumber), id: o.replyTo };
    let mediaId: string | undefined;

    if (o.media) {
      mediaId = newMediaId();
      const sha256 = createHash('sha256').update(o.media.bytes).digest('hex');
      media.set(mediaId, { bytes: o.media.bytes, mimeType: o.media.mimeType, sha256, filename: o.media.filename });
      const obj: Record<string, unknown> = { mime_type: o.media.mimeType, sha256, id: mediaId };
      const kind = o.media.kind;
      if ((kind === 'image' || kind === 'video' || kind === 'document') && o.text) obj.caption = o.text;
      if (kind === 'document' && o.media.filename) obj.filename = o.media.filename;
      if (kind === 'audio' || kind === 'voice') obj.voice = kind === 'voice';
      if (kind === 'sticker') obj.animated = false;
      // The Cloud API reports a voice note as type audio with voice: true.
      const type = kind === 'voice' ? 'audio' : kind;
      message.type = type;
      message[type] = obj;
    } else if (o.location) {
      message.type = 'location';
      message.location = Object.fromEntries(Object.entries(o.location).filter(([, v]) => v !== undefined));
    } else if (o.unsupported) {
      message.type = 'unsupported';
      message.errors = [
        { code: 131051, title: 'Message type unknown', message: 'Message type unknown', error_data: { details: 'Message type is currently not supported.' } },
      ];
    } else {
      message.type = 'text';
      message.text = { body: o.text };
    }

    const payload = envelope(n, { contacts: [{ profile: { name: o.profileName ?? 'Sandbox Customer' }, wa_id: from }], messages: [message] });
    const result: InjectInboundResult = { providerMessageId: id, webhookStatus: null };
    if (mediaId) result.mediaId = mediaId;
    const p = deliver('inbound', payload);
    track(p.then(() => undefined));
    result.webhookStatus = await p;
    return result;
  }

  // --- server ----------------------------------------------------------------------------

  const app: FastifyInstance = Fastify({
    logger: opts.logger ?? false,
    // Graph paths carry a version (/v21.0/...); the emulator answers with or without one.
    rewriteUrl: (req) => (req.url ?? '/').replace(/^\/v\d+\.\d+(?=\/|\?|$)/, '') || '/',
  });

  const sendGraphError = (reply: FastifyReply, err: GraphError) => reply.code(err.status).send(err.body());

  app.setErrorHandler((err: unknown, _req, reply) => {
    if (err instanceof GraphError) return sendGraphError(reply, err);
    if (err instanceof z.ZodError) return sendGraphError(reply, invalidParam('Invalid parameter', err.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')));
    const status = (err as { statusCode?: number }).statusCode ?? 500;
    const message = err instanceof Error ? err.message : String(err);
    if (status < 500) return sendGraphError(reply, new GraphError(status === 413 ? 413 : 400, 100, `(#100) ${message}`));
    return sendGraphError(reply, new GraphError(500, 1, 'An unknown error has occurred.', { type: 'OAuthException' }));
  });

  app.setNotFoundHandler((req, reply) =>
    sendGraphError(reply, new GraphError(400, 2500, `Unknown path components: ${req.url.split('?')[0]}`)),
  );

  app.post<{ Params: { phoneNumberId: string } }>('/:phoneNumberId/messages', async (req, reply) => {
    const token = checkBearer(req);
    const failure = sendFailures.shift();
    if (failure) {
      const d = defaultSendFailure(failure.status);
      throw new GraphError(failure.status, failure.code ?? d.code, failure.message ?? d.message);
    }
    const { phoneNumberId } = req.params;
    if (!/^[\w-]{1,64}$/.test(phoneNumberId)) throw new GraphError(400, 100, `(#100) Unsupported post request. Object with ID '${phoneNumberId}' does not exist.`, { subcode: 33 });
    const valid = validateSend(req.body);
    const n = resolveNumber(phoneNumberId);
    ownNumber(n, token, 'post');
    const id = newWamid();
    const recipient = digitsOf(valid.to);
    sent.push({ phoneNumberId, body: req.body as Record<string, unknown>, providerMessageId: id, at: new Date() });
    track(runStatuses(n, { id, recipient, opaque: valid.bizOpaqueCallbackData, template: valid.type === 'template' }));
    const message: Record<string, unknown> = { id };
    if (valid.type === 'template') message.message_status = 'accepted';
    return reply.send({ messaging_product: 'whatsapp', contacts: [{ input: valid.to, wa_id: recipient }], messages: [message] });
  });

  app.get<{ Params: { wabaId: string }; Querystring: Record<string, string | undefined> }>('/:wabaId/phone_numbers', async (req) => {
    const token = checkBearer(req);
    if (token === undefined) throw invalidToken();
    if (req.params.wabaId !== wabaId) throw noSuchObject('get', req.params.wabaId);
    const limit = Math.min(Math.max(Number(req.query.limit ?? 25) || 25, 1), 100);
    const visible = numbers.filter((n) => n.owner === undefined || n.owner === token);
    const start = req.query.after ? Number(Buffer.from(req.query.after, 'base64').toString('utf8').replace(/^idx:/, '')) : 0;
    if (!Number.isInteger(start) || start < 0) throw invalidParam('Invalid parameter', 'after: not a cursor this endpoint returned');
    const fields = (req.query.fields ?? 'id,display_phone_number,verified_name,quality_rating').split(',').concat('id');
    const page = visible.slice(start, start + limit).map((n) => {
      const full: Record<string, unknown> = {
        verified_name: 'Sandbox Business',
        code_verification_status: 'VERIFIED',
        display_phone_number: `+${n.displayPhoneNumber}`,
        quality_rating: 'GREEN',
        platform_type: 'CLOUD_API',
        throughput: { level: 'STANDARD' },
        id: n.phoneNumberId,
      };
      return Object.fromEntries(Object.entries(full).filter(([k]) => fields.includes(k)));
    });
    const cursor = (i: number) => Buffer.from(`idx:${i}`).toString('base64');
    const paging: Record<string, unknown> = { cursors: { before: cursor(start), after: cursor(start + page.length) } };
    if (start + page.length < visible.length) {
      const next = new URLSearchParams({ ...(req.query as Record<string, string>), after: cursor(start + page.length) });
      paging.next = `${origin}/${apiVersion}/${wabaId}/phone_numbers?${next}`;
    }
    return { data: page, paging };
  });

  app.get<{ Params: { mediaId: string } }>('/media-bytes/:mediaId', async (req, reply) => {
    checkBearer(req);
    const m = media.get(req.params.mediaId);
    if (!m) return reply.code(404).send({ error: { message: 'Media not found', type: 'OAuthException', code: 100 } });
    reply.header('Content-Type', m.mimeType).header('Content-Length', String(m.bytes.length));
    if (m.filename) reply.header('Content-Disposition', `attachment; filename*=UTF-8''${encodeURIComponent(m.filename)}`);
    return reply.send(m.bytes);
  });

  // --- control API (registered before the catch-all GET /:mediaId; static paths win anyway)
  app.get('/_sandbox/sent', async () => ({ sent: sent.map((s) => ({ ...s, at: s.at.toISOString() })) }));

  app.post('/_sandbox/inbound', { bodyLimit: 100 * 1024 * 1024 }, async (req) => {
    const b = ControlInbound.parse(req.body);
    const o: InjectInboundOptions = { from: b.from, to: b.to };
    if (b.text !== undefined) o.text = b.text;
    if (b.profileName !== undefined) o.profileName = b.profileName;
    if (b.location) o.location = b.location;
    if (b.unsupported) o.unsupported = true;
    if (b.replyTo) o.replyTo = b.replyTo;
    if (b.media) o.media = { kind: b.media.kind, mimeType: b.media.mimeType, bytes: Buffer.from(b.media.base64, 'base64'), filename: b.media.filename };
    try {
      return await injectInbound(o);
    } catch (err) {
      throw invalidParam('Invalid parameter', err instanceof Error ? err.message : String(err));
    }
  });

  app.post('/_sandbox/fail-next', async (req) => {
    const b = ControlFailNext.parse(req.body);
    failNext(b);
    return { ok: true };
  });

  app.post('/_sandbox/scenario', async (req) => {
    const b = ControlScenario.parse(req.body ?? {});
    scenario = { outOfOrder: b.outOfOrder ?? false, duplicates: b.duplicates ?? false };
    return { ok: true, scenario };
  });

  app.put('/_sandbox/webhook', async (req) => {
    const b = z.object({ url: z.url().nullable() }).parse(req.body);
    webhookUrl = b.url ?? undefined;
    return { ok: true, url: webhookUrl ?? null };
  });

  app.get<{ Params: { mediaId: string } }>('/:mediaId', async (req) => {
    const token = checkBearer(req);
    const id = req.params.mediaId;
    const m = media.get(id);
    if (!m) {
      // Not media: a business number, seen only by its owner. A known one, or (asked for as a
      // number, by its fields) one registered on first use like a send's, so any id works in a demo.
      const fields = String((req.query as Record<string, unknown>).fields ?? '').split(',');
      const known = numbers.some((n) => n.phoneNumberId === id);
      if (!/^\d{1,20}$/.test(id) || (!known && !fields.includes('display_phone_number'))) throw noSuchObject('get', id);
      if (token === undefined) throw invalidToken();
      const n = resolveNumber(id);
      ownNumber(n, token, 'get');
      return { id: n.phoneNumberId, display_phone_number: `+${n.displayPhoneNumber}`, verified_name: 'Sandbox Business', quality_rating: 'GREEN', platform_type: 'CLOUD_API' };
    }
    return { messaging_product: 'whatsapp', url: `${origin}/media-bytes/${id}`, mime_type: m.mimeType, sha256: m.sha256, file_size: m.bytes.length, id };
  });

  function failNext(f: FailNextOptions): void {
    if (f.kind === 'send') sendFailures.push({ ...f });
    else deliveryFailures.push({ ...f });
  }

  const address = await app.listen({ port: opts.port ?? 0, host });
  const port = new URL(address).port;
  const publicHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  origin = `http://${publicHost}:${port}`;

  return {
    url: `${origin}/${apiVersion}`,
    origin,
    businessAccountId: wabaId,
    sent,
    callbacks,
    setWebhookUrl(url) {
      webhookUrl = url;
    },
    failNext,
    scenario(s) {
      scenario = { outOfOrder: s.outOfOrder ?? false, duplicates: s.duplicates ?? false };
    },
    registerNumber(phoneNumberId, displayPhoneNumber, accessToken) {
      const existing = numbers.findIndex((n) => n.phoneNumberId === phoneNumberId);
      if (existing >= 0) numbers.splice(existing, 1);
      numbers.push({ phoneNumberId, displayPhoneNumber: digitsOf(displayPhoneNumber), owner: accessToken });
    },
    injectInbound,
    async idle() {
      while (pending.size > 0) await Promise.all([...pending]);
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const [t, resolve] of timers) {
        clearTimeout(t);
        resolve();
      }
      timers.clear();
      aborter.abort();
      await Promise.all([...pending]);
      await app.close();
    },
  };
}

// --- control API bodies ------------------------------------------------------------------

const ControlInbound = z.object({
  from: z.string().min(1),
  to: z.string().min(1),
  text: z.string().optional(),
  profileName: z.string().optional(),
  replyTo: z.string().optional(),
  unsupported: z.boolean().optional(),
  media: z
    .object({
      kind: z.enum(['image', 'audio', 'video', 'document', 'sticker', 'voice']),
      mimeType: z.string().min(1),
      base64: z.string(),
      filename: z.string().optional(),
    })
    .optional(),
  location: z
    .object({ latitude: z.number().min(-90).max(90), longitude: z.number().min(-180).max(180), name: z.string().optional(), address: z.string().optional() })
    .optional(),
});

const ControlFailNext = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('send'), status: z.number().int().min(400).max(599), code: z.number().int().optional(), message: z.string().optional() }),
  z.object({ kind: z.literal('delivery'), error: z.string().min(1), code: z.number().int().optional() }),
]);

const ControlScenario = z.object({ outOfOrder: z.boolean().optional(), duplicates: z.boolean().optional() });

