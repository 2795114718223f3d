import { randomBytes } from 'node:crypto';

/**
 * SIP messages (RFC 3261 §7), as much as a UAC over UDP needs: one message per datagram,
 * headers as ordered name/value pairs (a header may repeat: Via, Record-Route), compact
 * names expanded, the body cut at Content-Length.
 */
export interface SipMessage {
  /** Set on requests. */
  method?: string;
  uri?: string;
  /** Set on responses. */
  status?: number;
  reason?: string;
  headers: Array<[string, string]>;
  body: string;
}

const COMPACT: Record<string, string> = {
  v: 'via',
  f: 'from',
  t: 'to',
  i: 'call-id',
  m: 'contact',
  l: 'content-length',
  c: 'content-type',
  k: 'supported',
  s: 'subject',
  e: 'content-encoding',
};

/** The canonical spelling of a header name for writing, from any case or compact form. */
function canonical(name: string): string {
  const lower = name.toLowerCase();
  const long = COMPACT[lower] ?? lower;
  if (long === 'call-id') return 'Call-ID';
  if (long === 'cseq') return 'CSeq';
  if (long === 'www-authenticate') return 'WWW-Authenticate';
  return long.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
}

/** Parses one datagram; null when it is not a SIP message (a keep-alive CRLF, garbage). */
export function parseMessage(raw: Buffer | string): SipMessage | null {
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  const head = split === -1 ? text : text.slice(0, split);
  const lines = head.split(/\r\n/);
  const first = lines.shift()?.trim() ?? '';
  const msg: SipMessage = { headers: [], body: '' };
  const response = /^SIP\/2\.0 (\d{3}) ?(.*)$/.exec(first);
  const request = /^([A-Z]+) (\S+) SIP\/2\.0$/.exec(first);
  if (response) {
    msg.status = Number(response[1]);
    msg.reason = response[2];
  } else if (request) {
    msg.method = request[1];
    msg.uri = request[2];
  } else {
    return null;
  }
  for (const line of lines) {
    // Folded continuation lines (obsolete, still legal) join the previous header.
    if (/^[ \t]/.test(line) && msg.headers.length) {
      msg.headers[msg.headers.length - 1][1] += ` ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = canonical(line.slice(0, colon).trim());
    const value = line.slice(colon + 1).trim();
    // Via and Record-Route may carry several values on one line.
    const values = name === 'Via' || name === 'Record-Route' || name === 'Route' ? splitList(value) : [value];
    for (const v of values) msg.headers.push([name, v]);
  }
  const body = split === -1 ? '' : text.slice(split + 4);
  const length = Number(header(msg, 'Content-Length') ?? body.length);
  msg.body = Number.isFinite(length) ? Buffer.from(body, 'utf8').subarray(0, length).toString('utf8') : body;
  return msg;
}

/** Splits a comma-separated header value, leaving commas inside quotes and <…> alone. */
function splitList(value: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '"' && value[i - 1] !== '\\') quoted = !quoted;
    else if (!quoted && c === '<') depth++;
    else if (!quoted && c === '>') depth--;
    else if (!quoted && depth === 0 && c === ',') {
      out.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(value.slice(start).trim());
  return out.filter(Boolean);
}

/** The first value of a header (any case, compact or long name). */
export function header(msg: SipMessage, name: string): string | undefined {
  const want = canonical(name);
  return msg.headers.find(([n]) => n === want)?.[1];
}

/** Every value of a header, in order. */
export function headers(msg: SipMessage, name: string): string[] {
  const want = canonical(name);
  return msg.headers.filter(([n]) => n === want).map(([, v]) => v);
}

/** Writes a message; Content-Length is always set from the body. */
export function serialize(msg: SipMessage): string {
  const first = msg.method ? `${msg.method} ${msg.uri} SIP/2.0` : `SIP/2.0 ${msg.status} ${msg.reason ?? ''}`;
  const lines = [first, ...msg.headers.filter(([n]) => canonical(n) !== 'Content-Length').map(([n, v]) => `${canonical(n)}: ${v}`)];
  lines.push(`Content-Length: ${Buffer.byteLength(msg.body, 'utf8')}`);
  return `${lines.join('\r\n')}\r\n\r\n${msg.body}`;
}

/** A header parameter (`;tag=…`, `;branch=…`, `;received=…`), outside any <…> URI. */
export function param(value: string, name: string): string | undefined {
  const afterUri = value.includes('>') ? value.slice(value.lastIndexOf('>') + 1) : value;
  const m = new RegExp(`;\\s*${name}(?:=([^;,\\s]*))?`, 'i').exec(afterUri);
  if (!m) return undefined;
  return m[1] ?? '';
}

/** The URI of a name-addr (`"Bob" <sip:bob@host>;tag=x` → `sip:bob@host`) or addr-spec. */
export function uriOf(value: string): string {
  const m = /<([^>]*)>/.exec(value);
  return (m ? m[1] : value.split(';')[0]).trim();
}

/** CSeq's number and method. */
export function cseq(msg: SipMessage): { seq: number; method: string } {
  const [n, method] = (header(msg, 'CSeq') ?? '').split(/\s+/);
  return { seq: Number(n), method: method ?? '' };
}

/** A transaction branch (the RFC 3261 magic cookie first). */
export const newBranch = (): string => `z9hG4bK${randomBytes(8).toString('hex')}`;
export const newTag = (): string => randomBytes(6).toString('hex');
