/**
 * msgapp's provider: the WhatsApp Cloud API (Graph API) behind a small interface, so the
 * embedded sandbox (dev/fake-msgapp) and a real business number are interchangeable.
 *
 * Re-exports the webhook half (signature check, schemas, parseWebhook) from ./webhook.
 */
export * from './webhook';
import { ProviderError, type OutboundContent, type SendRequest, type SendResult, type DownloadedMedia, type ProviderErrorDetails, type PhoneNumberInfo, type BusinessPhoneNumber, type MsgappProvider } from '../../domain/ports/msgapp';
export { ProviderError, type OutboundContent, type SendRequest, type SendResult, type DownloadedMedia, type ProviderErrorDetails, type PhoneNumberInfo, type BusinessPhoneNumber, type MsgappProvider } from '../../domain/ports/msgapp';

/** Pages of `GET /{waba-id}/phone_numbers` followed at most; a business account has a handful of numbers. */
export const MAX_PHONE_NUMBER_PAGES = 10;

export interface CloudApiProviderOptions {
  /** MSGAPP_API_BASE, e.g. https://graph.facebook.com/v21.0 (or the sandbox's `url`). */
  baseUrl: string;
  /** Per request (send, media metadata). */
  timeoutMs: number;
  /** For the media bytes, body included. Default max(timeoutMs, 60 s). */
  mediaTimeoutMs?: number;
  /** Largest media download. Default 64 MiB. */
  maxMediaBytes?: number;
  /** Tests only. */
  fetch?: typeof fetch;
}

export const DEFAULT_MAX_MEDIA_BYTES = 64 * 1024 * 1024;
export const DEFAULT_TEMPLATE_LANGUAGE = 'en_US';

/**
 * Graph error codes Meta documents as throttling or temporary, which it often returns with
 * HTTP 400: 1 (unknown, possibly server), 2 (service temporarily unavailable), 4 (app rate
 * limit), 80007 (WABA rate limit), 130429 (throughput), 131000 (something went wrong),
 * 131016 (service unavailable), 131056 (pair rate limit), 133004 (server unavailable).
 */
export const RETRYABLE_GRAPH_CODES: ReadonlySet<number> = new Set([1, 2, 4, 80007, 130429, 131000, 131016, 131056, 133004]);

export function isRetryable(status: number, code: string | number | undefined): boolean {
  if (status === 0 || status === 429 || status >= 500) return true;
  return typeof code === 'number' && RETRYABLE_GRAPH_CODES.has(code);
}

/** The Cloud API body of `POST /{phone_number_id}/messages` for one message. */
export function buildMessagePayload(to: string, content: OutboundContent, clientMessageId?: string): Record<string, unknown> {
  const base: Record<string, unknown> = { messaging_product: 'whatsapp', recipient_type: 'individual', to };
  const withOptional = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  let typed: Record<string, unknown>;
  switch (content.kind) {
    case 'text':
      typed = { type: 'text', text: { body: content.text, preview_url: false } };
      break;
    case 'image':
    case 'video':
      typed = { type: content.kind, [content.kind]: withOptional({ link: content.url, caption: content.caption }) };
      break;
    case 'audio':
      typed = { type: 'audio', audio: { link: content.url } };
      break;
    case 'document':
      typed = { type: 'document', document: withOptional({ link: content.url, caption: content.caption, filename: content.filename }) };
      break;
    case 'location':
      typed = {
        type: 'location',
        location: withOptional({ latitude: content.latitude, longitude: content.longitude, name: content.name, address: content.address }),
      };
      break;
    case 'template': {
      const template: Record<string, unknown> = { name: content.name, language: { code: content.language ?? DEFAULT_TEMPLATE_LANGUAGE } };
      if (content.variables && content.variables.length > 0) {
        template.components = [{ type: 'body', parameters: content.variables.map((text) => ({ type: 'text', text })) }];
      }
      typed = { type: 'template', template };
      break;
    }
    default: {
      const never: never = content;
      throw new Error(`unknown content kind ${(never as { kind: string }).kind}`);
    }
  }
  const payload = { ...base, ...typed };
  if (clientMessageId) payload.biz_opaque_callback_data = clientMessageId;
  return payload;
}

interface GraphErrorBody {
  error?: { message?: unknown; type?: unknown; code?: unknown; error_subcode?: unknown; fbtrace_id?: unknown; error_data?: { details?: unknown } };
}

export class CloudApiProvider implements MsgappProvider {
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly mediaTimeoutMs: number;
  private readonly maxMediaBytes: number;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: CloudApiProviderOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs;
    this.mediaTimeoutMs = opts.mediaTimeoutMs ?? Math.max(opts.timeoutMs, 60_000);
    this.maxMediaBytes = opts.maxMediaBytes ?? DEFAULT_MAX_MEDIA_BYTES;
    this.fetchImpl = opts.fetch ?? fetch;
  }

  async send(req: SendRequest): Promise<SendResult> {
    const url = `${this.baseUrl}/${encodeURIComponent(req.phoneNumberId)}/messages`;
    const body = JSON.stringify(buildMessagePayload(req.to, req.content, req.clientMessageId));
    const res = await this.request(url, {
      method: 'POST',
      headers: { ...this.auth(req.accessToken), 'Content-Type': 'application/json' },
      body,
      timeoutMs: this.timeoutMs,
    });
    const json = await this.readJson(res, this.timeoutMs);
    const id = (json as { messages?: Array<{ id?: unknown }> }).messages?.[0]?.id;
    if (typeof id !== 'string' || id === '') {
      // Accepted but unreadable: the message may well be on its way, so do not retry it.
      throw new ProviderError(res.status, 'invalid_response', 'send response has no messages[0].id', false);
    }
    return { providerMessageId: id };
  }

  async downloadMedia(mediaId: string, accessToken: string): Promise<DownloadedMedia> {
    const metaRes = await this.request(`${this.baseUrl}/${encodeURIComponent(mediaId)}`, {
      method: 'GET',
      headers: this.auth(accessToken),
      timeoutMs: this.timeoutMs,
    });
    const meta = (await this.readJson(metaRes, this.timeoutMs)) as { url?: unknown; mime_type?: unknown; file_size?: unknown };
    if (typeof meta.url !== 'string' || !/^https?:\/\//i.test(meta.url)) {
      throw new ProviderError(metaRes.status, 'invalid_response', 'media metadata has no http(s) url', false);
    }
    const declared = typeof meta.file_size === 'number' ? meta.file_size : Number(meta.file_size);
    if (Number.isFinite(declared) && declared > this.maxMediaBytes) {
      throw new ProviderError(metaRes.status, 'too_large', `media is ${declared} bytes, more than the ${this.maxMediaBytes} allowed`, false);
    }

    // The download URL needs the same bearer token (Meta's lookaside host requires it).
    // Redirects are followed; fetch drops Authorization when one leaves the origin.
    const signal = AbortSignal.timeout(this.mediaTimeoutMs);
    const res = await this.request(meta.url, { method: 'GET', headers: this.auth(accessToken), timeoutMs: this.mediaTimeoutMs, signal, redirect: 'follow' });
    if (!res.ok) await this.readJson(res, this.mediaTimeoutMs); // throws the mapped error
    const bytes = await this.readCapped(res, signal);
    const mimeType =
      typeof meta.mime_type === 'string' && meta.mime_type !== ''
        ? meta.mime_type
        : (res.headers.get('content-type')?.split(';')[0].trim() ?? 'application/octet-stream');
    const out: DownloadedMedia = { bytes, mimeType };
    const filename = filenameFromDisposition(res.headers.get('content-disposition'));
    if (filename) out.filename = filename;
    return out;
  }

  async getPhoneNumber(phoneNumberId: string, accessToken: string): Promise<PhoneNumberInfo> {
    const url = `${this.baseUrl}/${encodeURIComponent(phoneNumberId)}?fields=id,display_phone_number,verified_name`;
    const res = await this.request(url, { method: 'GET', headers: this.auth(accessToken), timeoutMs: this.timeoutMs });
    const json = (await this.readJson(res, this.timeoutMs)) as { id?: unknown; display_phone_number?: unknown; verified_name?: unknown };
    // The answer must be about the number asked for: Graph resolves other ids (media, users) on the same path.
    if (json.id !== phoneNumberId || typeof json.display_phone_number !== 'string') {
      throw new ProviderError(res.status, 'invalid_response', `GET /${phoneNumberId} did not describe that phone number`, false);
    }
    const out: PhoneNumberInfo = { id: json.id, displayPhoneNumber: json.display_phone_number };
    if (typeof json.verified_name === 'string') out.verifiedName = json.verified_name;
    return out;
  }

  async listPhoneNumbers(businessAccountId: string, accessToken: string): Promise<BusinessPhoneNumber[]> {
    const out: BusinessPhoneNumber[] = [];
    let after: string | undefined;
    for (let page = 0; page < MAX_PHONE_NUMBER_PAGES; page++) {
      // The next page is asked for by its `after` cursor on our own base URL, never by
      // following `paging.next`: the token only ever goes to the configured host.
      const query = new URLSearchParams({ fields: 'id,display_phone_number,verified_name,quality_rating', limit: '100' });
      if (after) query.set('after', after);
      const url = `${this.baseUrl}/${encodeURIComponent(businessAccountId)}/phone_numbers?${query}`;
      const res = await this.request(url, { method: 'GET', headers: this.auth(accessToken), timeoutMs: this.timeoutMs });
      const json = (await this.readJson(res, this.timeoutMs)) as { data?: unknown; paging?: { cursors?: { after?: unknown }; next?: unknown } };
      if (!Array.isArray(json.data)) throw new ProviderError(res.status, 'invalid_response', `GET /${businessAccountId}/phone_numbers has no data array`, false);
      for (const row of json.data as Array<Record<string, unknown>>) {
        if (typeof row?.id !== 'string' || typeof row.display_phone_number !== 'string') continue;
        const n: BusinessPhoneNumber = { id: row.id, displayPhoneNumber: row.display_phone_number };
        if (typeof row.verified_name === 'string') n.verifiedName = row.verified_name;
        if (typeof row.quality_rating === 'string') n.qualityRating = row.quality_rating;
        out.push(n);
      }
      const next = json.paging?.cursors?.after;
      // Graph gives `paging.next` only when another page exists.
      if (typeof json.paging?.next !== 'string' || typeof next !== 'string' || next === '') break;
      after = next;
    }
    return out;
  }

  private auth(token: string): Record<string, string> {
    return { Authorization: `Bearer ${token}` };
  }

  /** fetch with a deadline; transport failures and time-outs become retryable ProviderErrors. */
  private async request(
    url: string,
    init: { method: string; headers: Record<string, string>; body?: string; timeoutMs: number; signal?: AbortSignal; redirect?: 'error' | 'follow' },
  ): Promise<Response> {
    try {
      return await this.fetchImpl(url, {
        method: init.method,
        headers: init.headers,
        body: init.body,
        // Graph calls never redirect; one that does is refused rather than followed with the token.
        redirect: init.redirect ?? 'error',
        signal: init.signal ?? AbortSignal.timeout(init.timeoutMs),
      });
    } catch (err) {
      throw transportError(err, init.timeoutMs);
    }
  }

  /** The JSON body of a 2xx response; a Graph error (or any non-2xx) becomes a ProviderError. */
  private async readJson(res: Response, timeoutMs: number): Promise<unknown> {
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw transportError(err, timeoutMs);
    }
    let json: unknown;
    try {
      json = text === '' ? {} : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (res.ok) {
      if (json === undefined || typeof json !== 'object' || json === null) {
        throw new ProviderError(res.status, 'invalid_response', `HTTP ${res.status} with a body that is not a JSON object`, false);
      }
      return json;
    }
    const e = (json as GraphErrorBody | undefined)?.error;
    if (e && typeof e === 'object') {
      const code = typeof e.code === 'number' ? e.code : typeof e.code === 'string' && /^\d+$/.test(e.code) ? Number(e.code) : undefined;
      // The HTTP status leads: Graph messages alone ("(#131000) Something went wrong") do not say it.
      const message = typeof e.message === 'string' && e.message !== '' ? `HTTP ${res.status}: ${e.message}` : `HTTP ${res.status}`;
      const graph: ProviderErrorDetails = {};
      if (typeof e.error_subcode === 'number') graph.subcode = e.error_subcode;
      if (typeof e.type === 'string') graph.type = e.type;
      if (typeof e.fbtrace_id === 'string') graph.fbtraceId = e.fbtrace_id;
      if (typeof e.error_data?.details === 'string') graph.details = e.error_data.details;
      throw new ProviderError(res.status, code, message, isRetryable(res.status, code), graph);
    }
    const snippet = text.slice(0, 200).replace(/\s+/g, ' ').trim();
    throw new ProviderError(res.status, undefined, `HTTP ${res.status}${snippet ? `: ${snippet}` : ''}`, isRetryable(res.status, undefined));
  }

  private async readCapped(res: Response, signal: AbortSignal): Promise<Buffer> {
    const length = Number(res.headers.get('content-length'));
    if (Number.isFinite(length) && length > this.maxMediaBytes) {
      await res.body?.cancel().catch(() => undefined);
      throw new ProviderError(res.status, 'too_large', `media is ${length} bytes, more than the ${this.maxMediaBytes} allowed`, false);
    }
    if (!res.body) return Buffer.alloc(0);
    const chunks: Buffer[] = [];
    let total = 0;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        total += value.byteLength;
        if (total > this.maxMediaBytes) {
          await reader.cancel().catch(() => undefined);
          throw new ProviderError(res.status, 'too_large', `media is more than the ${this.maxMediaBytes} bytes allowed`, false);
        }
        chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
      }
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw transportError(signal.aborted ? signal.reason : err, this.mediaTimeoutMs);
    } finally {
      reader.releaseLock();
    }
    return Buffer.concat(chunks, total);
  }
}

function transportError(err: unknown, timeoutMs: number): ProviderError {
  const name = (err as { name?: string } | undefined)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new ProviderError(0, 'timeout', `no response within ${timeoutMs} ms`, true);
  }
  const cause = (err as { cause?: { message?: string; code?: string } } | undefined)?.cause;
  const detail = cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
  return new ProviderError(0, 'transport', `transport error: ${detail}`, true);
}

function filenameFromDisposition(header: string | null): string | undefined {
  if (!header) return undefined;
  const star = /filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)/.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      // fall through to the plain parameter
    }
  }
  const plain = /filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/.exec(header);
  const name = plain ? (plain[1] ?? plain[2]).replace(/\\(.)/g, '$1') : undefined;
  return name || undefined;
}
