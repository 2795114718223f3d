import { randomBytes, randomInt } from 'node:crypto';

/**
 * What the sandbox says the way the Graph API says it: error bodies, ids, and the check of
 * a `POST /{phone_number_id}/messages` body. Written from the Cloud API reference, not
 * from our client (providers/msgapp/cloud-api.ts), so the tests compare two readings of the spec.
 */

export interface GraphErrorBody {
  error: {
    message: string;
    type: string;
    code: number;
    error_subcode?: number;
    error_data?: { messaging_product: 'whatsapp'; details: string };
    fbtrace_id: string;
  };
}

export class GraphError extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly extra: { subcode?: number; details?: string; type?: string } = {},
  ) {
    super(message);
    this.name = 'GraphError';
  }

  body(): GraphErrorBody {
    const error: GraphErrorBody['error'] = { message: this.message, type: this.extra.type ?? 'OAuthException', code: this.code, fbtrace_id: fbtraceId() };
    if (this.extra.subcode !== undefined) error.error_subcode = this.extra.subcode;
    if (this.extra.details !== undefined) error.error_data = { messaging_product: 'whatsapp', details: this.extra.details };
    return { error };
  }
}

export const invalidParam = (message: string, details?: string) => new GraphError(400, 100, `(#100) ${message}`, details ? { details } : {});

export const invalidToken = () => new GraphError(401, 190, 'Invalid OAuth access token - Cannot parse access token');

/** Defaults for `failNext({kind: 'send', status})` when no code or message is given. */
export function defaultSendFailure(status: number): { code: number; message: string } {
  if (status === 429) return { code: 130429, message: '(#130429) Rate limit hit' };
  if (status === 401) return { code: 190, message: 'Invalid OAuth access token - Cannot parse access token' };
  if (status === 403) return { code: 10, message: '(#10) Application does not have permission for this action' };
  if (status >= 500) return { code: 131000, message: '(#131000) Something went wrong' };
  return { code: 100, message: '(#100) Invalid parameter' };
}

export const fbtraceId = () => randomBytes(17).toString('base64').replace(/[+/=]/g, '').slice(0, 23);

/** `wamid.` + base64, the shape of a WhatsApp message id. */
export const newWamid = () => `wamid.${randomBytes(30).toString('base64')}`;

/** Media ids are 15-16 digit numbers. */
export const newMediaId = () => `${randomInt(1, 10)}${Array.from({ length: 15 }, () => randomInt(0, 10)).join('')}`;

export const digitsOf = (phone: string) => phone.replace(/\D/g, '');

// ---------------------------------------------------------------------------------------
// Validation of a send

const TYPES = ['audio', 'contacts', 'document', 'image', 'interactive', 'location', 'reaction', 'sticker', 'template', 'text', 'video'] as const;
type MessageType = (typeof TYPES)[number];
const MEDIA_TYPES = new Set<MessageType>(['audio', 'document', 'image', 'sticker', 'video']);
const CAPTIONED = new Set<MessageType>(['document', 'image', 'video']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';

function httpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

export interface ValidSend {
  to: string;
  type: MessageType;
  bizOpaqueCallbackData?: string;
}

/** Throws GraphError (400, code 100) where the Cloud API would refuse the body. */
export function validateSend(body: unknown): ValidSend {
  if (!isObject(body)) throw invalidParam('Invalid parameter', 'the request body must be a JSON object');

  if (body.messaging_product === undefined) throw invalidParam('The parameter messaging_product is required.');
  if (body.messaging_product !== 'whatsapp') {
    throw invalidParam(`Param messaging_product must be one of {WHATSAPP} - got "${String(body.messaging_product)}".`);
  }
  if (body.recipient_type !== undefined && body.recipient_type !== 'individual' && body.recipient_type !== 'group') {
    throw invalidParam(`Param recipient_type must be one of {INDIVIDUAL, GROUP} - got "${String(body.recipient_type)}".`);
  }
  if (body.to === undefined || body.to === '') throw invalidParam('The parameter to is required.');
  if (!isString(body.to) || !/^\+?[\d\s().-]+$/.test(body.to) || digitsOf(body.to).length < 6 || digitsOf(body.to).length > 15) {
    throw invalidParam('Invalid parameter', `to: "${String(body.to)}" is not a phone number`);
  }
  // As in the Cloud API, a body without `type` is a text message.
  const type = body.type === undefined ? 'text' : body.type;
  if (!isString(type) || !(TYPES as readonly string[]).includes(type)) {
    throw invalidParam(`Param type must be one of {${TYPES.map((t) => t.toUpperCase()).join(', ')}} - got "${String(type)}".`);
  }
  const t = type as MessageType;
  const obj = body[t];
  if (obj === undefined) throw invalidParam(`The parameter ${t} is required.`);
  if (!isObject(obj)) throw invalidParam(`Param ${t} must be a JSON object.`);

  if (t === 'text') validateText(obj);
  else if (MEDIA_TYPES.has(t)) validateMedia(t, obj);
  else if (t === 'location') validateLocation(obj);
  else if (t === 'template') validateTemplate(obj);

  const out: ValidSend = { to: body.to, type: t };
  if (body.biz_opaque_callback_data !== undefined) {
    if (!isString(body.biz_opaque_callback_data) || body.biz_opaque_callback_data.length > 512) {
      throw invalidParam('Param biz_opaque_callback_data must be a string of at most 512 characters.');
    }
    out.bizOpaqueCallbackData = body.biz_opaque_callback_data;
  }
  return out;
}

function validateText(o: Record<string, unknown>): void {
  if (!isString(o.body) || o.body.trim() === '') throw invalidParam("The parameter text['body'] is required.");
  if (o.body.length > 4096) throw invalidParam("Param text['body'] must be at most 4096 characters long.");
  if (o.preview_url !== undefined && typeof o.preview_url !== 'boolean') throw invalidParam("Param text['preview_url'] must be a boolean.");
}

function validateMedia(t: MessageType, o: Record<string, unknown>): void {
  const hasLink = o.link !== undefined;
  const hasId = o.id !== undefined;
  if (hasLink === hasId) throw invalidParam(`Param ${t} must have exactly one of ${t}['link'] or ${t}['id'].`);
  if (hasLink && (!isString(o.link) || !httpUrl(o.link))) throw invalidParam(`Param ${t}['link'] is not a valid URI.`);
  if (hasId && (!isString(o.id) || !/^\d+$/.test(o.id))) throw invalidParam(`Param ${t}['id'] is not a valid media id.`);
  if (o.caption !== undefined) {
    if (!CAPTIONED.has(t)) throw invalidParam(`Param ${t}['caption'] is not allowed for ${t} messages.`);
    if (!isString(o.caption) || o.caption.length > 1024) throw invalidParam(`Param ${t}['caption'] must be a string of at most 1024 characters.`);
  }
  if (o.filename !== undefined && (t !== 'document' || !isString(o.filename))) throw invalidParam(`Param ${t}['filename'] is only allowed as a string on documents.`);
}

function validateLocation(o: Record<string, unknown>): void {
  const lat = o.latitude;
  const lon = o.longitude;
  if (lat === undefined) throw invalidParam("The parameter location['latitude'] is required.");
  if (lon === undefined) throw invalidParam("The parameter location['longitude'] is required.");
  if (typeof lat !== 'number' || !Number.isFinite(lat) || lat < -90 || lat > 90) throw invalidParam("Param location['latitude'] must be a number between -90 and 90.");
  if (typeof lon !== 'number' || !Number.isFinite(lon) || lon < -180 || lon > 180) throw invalidParam("Param location['longitude'] must be a number between -180 and 180.");
  for (const k of ['name', 'address'] as const) {
    if (o[k] !== undefined && !isString(o[k])) throw invalidParam(`Param location['${k}'] must be a string.`);
  }
}

function validateTemplate(o: Record<string, unknown>): void {
  if (!isString(o.name) || o.name === '') throw invalidParam("The parameter template['name'] is required.");
  if (!isObject(o.language) || !isString(o.language.code) || o.language.code === '') throw invalidParam("The parameter template['language']['code'] is required.");
  if (o.components === undefined) return;
  if (!Array.isArray(o.components)) throw invalidParam("Param template['components'] must be an array.");
  o.components.forEach((c: unknown, i) => {
    const at = `template['components'][${i}]`;
    if (!isObject(c) || !isString(c.type) || !['header', 'body', 'footer', 'button'].includes(c.type)) {
      throw invalidParam(`Param ${at}['type'] must be one of {HEADER, BODY, FOOTER, BUTTON}.`);
    }
    if (c.parameters === undefined) return;
    if (!Array.isArray(c.parameters)) throw invalidParam(`Param ${at}['parameters'] must be an array.`);
    c.parameters.forEach((p: unknown, j) => {
      if (!isObject(p) || !isString(p.type)) throw invalidParam(`The parameter ${at}['parameters'][${j}]['type'] is required.`);
      if (p.type === 'text' && !isString(p.text)) throw invalidParam(`The parameter ${at}['parameters'][${j}]['text'] is required.`);
    });
  });
}
