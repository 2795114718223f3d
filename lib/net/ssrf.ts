import { BlockList, isIP } from 'node:net';
import { promises as dns } from 'node:dns';

/**
 * SSRF policy for customer-supplied webhook URLs: which URLs are syntactically
 * acceptable and which IP addresses may be connected to.
 *
 * Forbidden unless the operator's allow list (`policyFromCidrs`) names them: every
 * address that is not ordinary public unicast — private, loopback, link-local,
 * unspecified, CGNAT, multicast, broadcast, documentation, benchmarking and other
 * IANA special-purpose ranges; for IPv6 everything outside 2000::/3 plus the special
 * ranges inside it. IPv6 forms that embed an IPv4 address (IPv4-mapped, IPv4-compatible,
 * NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the embedded IPv4 address.
 * The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is forbidden outright: its
 * embedding depends on the operator's prefix length, so the IPv4 target cannot be
 * read reliably. Teredo (2001::/32) is forbidden outright as well.
 *
 * URL spellings of IPv4 addresses (decimal, hex, octal, short forms, percent-encoded or
 * full-width digits) are normalised to dotted quads by the WHATWG URL parser, so the
 * checks below only ever see canonical hosts.
 */

export class UnsafeUrlError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'UnsafeUrlError';
  }
}

export interface AddressPolicy {
  /** Ranges that may be connected to even though they are not public (self-hosting, tests). */
  allow: BlockList | null;
}

export const MAX_URL_LENGTH = 2048;

/**
 * Parses a comma-separated list of CIDRs (`127.0.0.0/8,::1/128`) into an allow list.
 * A bare address is taken as a single host (/32 or /128). Empty or unset: nothing allowed.
 */
export function policyFromCidrs(csv: string | undefined): AddressPolicy {
  const entries = (csv ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (entries.length === 0) return { allow: null };
  const allow = new BlockList();
  for (const entry of entries) {
    const m = /^([^/]+?)(?:\/(\d{1,3}))?$/.exec(entry);
    const family = m ? isIP(m[1]) : 0;
    const max = family === 4 ? 32 : 128;
    const prefix = m?.[2] === undefined ? max : Number(m[2]);
    if (!m || family === 0 || m[1].includes('%') || prefix > max) {
      throw new Error(`invalid CIDR in address allow list: "${entry}" (expected e.g. 10.0.0.0/8 or fd00::/8)`);
    }
    allow.addSubnet(m[1], prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return { allow };
}

function rangeList(family: 'ipv4' | 'ipv6', cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [addr, len] = cidr.split('/');
    list.addSubnet(addr, Number(len), family);
  }
  return list;
}

/** Checked in order; the first match names the reason. */
const V4_FORBIDDEN: Array<[string, BlockList]> = [
  ['a broadcast', rangeList('ipv4', ['255.255.255.255/32'])],
  ['an unspecified', rangeList('ipv4', ['0.0.0.0/8'])],
  ['a private', rangeList('ipv4', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])],
  ['a loopback', rangeList('ipv4', ['127.0.0.0/8'])],
  ['a link-local', rangeList('ipv4', ['169.254.0.0/16'])],
  ['a carrier-grade NAT', rangeList('ipv4', ['100.64.0.0/10'])],
  ['a multicast', rangeList('ipv4', ['224.0.0.0/4'])],
  ['a documentation', rangeList('ipv4', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24'])],
  ['a benchmarking', rangeList('ipv4', ['198.18.0.0/15'])],
  // 192.0.0.0/24 IETF protocol assignments, 192.88.99.0/24 deprecated 6to4 relay anycast, 240/4 future use.
  ['a reserved', rangeList('ipv4', ['192.0.0.0/24', '192.88.99.0/24', '240.0.0.0/4'])],
];

const V6_FORBIDDEN: Array<[string, BlockList]> = [
  ['a link-local', rangeList('ipv6', ['fe80::/10'])],
  ['a unique-local', rangeList('ipv6', ['fc00::/7'])],
  ['a site-local', rangeList('ipv6', ['fec0::/10'])],
  ['a multicast', rangeList('ipv6', ['ff00::/8'])],
  ['a documentation', rangeList('ipv6', ['2001:db8::/32', '3fff::/20'])],
  ['a discard-only', rangeList('ipv6', ['100::/64'])],
  ['a Teredo', rangeList('ipv6', ['2001::/32'])],
  ['a benchmarking', rangeList('ipv6', ['2001:2::/48'])],
  ['an ORCHID', rangeList('ipv6', ['2001:10::/28', '2001:20::/28'])],
  ['a local-use NAT64', rangeList('ipv6', ['64:ff9b:1::/48'])],
  ['an SRv6 SID', rangeList('ipv6', ['5f00::/16'])],
];
const V6_GLOBAL_UNICAST = rangeList('ipv6', ['2000::/3']);

/** The eight 16-bit groups of a valid IPv6 address (zone id already removed). */
function ipv6Groups(ip: string): number[] {
  let text = ip;
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    // Trailing dotted IPv4 (::ffff:1.2.3.4): rewrite as two hex groups.
    const [a, b, c, d] = last.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((x) => parseInt(x, 16)));
  const halves = text.split('::');
  if (halves.length === 1) return parse(text);
  const head = parse(halves[0]);
  const tail = parse(halves[1]);
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

const v4From = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/** The IPv4 address embedded in an IPv6 address, with the name of the embedding. */
function embeddedIPv4(g: number[]): { v4: string; via: string } | null {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return { v4: v4From(g[6], g[7]), via: 'IPv4-mapped' };
  // ::/96 minus :: and ::1, which are classified on their own before this is asked.
  if (zeros(0, 6)) return { v4: v4From(g[6], g[7]), via: 'IPv4-compatible' };
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return { v4: v4From(g[6], g[7]), via: 'NAT64' };
  if (g[0] === 0x2002) return { v4: v4From(g[1], g[2]), via: '6to4' };
  return null;
}

/**
 * Null when `ip` may be connected to under `policy`; otherwise why not, as a noun phrase
 * such as "a loopback address (127.0.0.1)".
 */
export function forbiddenReason(ip: string, policy: AddressPolicy): string | null {
  const addr = ip.split('%')[0]; // a zone id (fe80::1%eth0) does not change the class
  const family = isIP(addr);
  if (family === 0) return `not an IP address (${ip})`;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (policy.allow?.check(addr, type)) return null;

  if (family === 4) {
    for (const [what, list] of V4_FORBIDDEN) if (list.check(addr, 'ipv4')) return `${what} address (${ip})`;
    return null;
  }

  const g = ipv6Groups(addr);
  if (g.every((x) => x === 0)) return `an unspecified address (${ip})`;
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return `a loopback address (${ip})`;
  const embedded = embeddedIPv4(g);
  if (embedded) {
    const inner = forbiddenReason(embedded.v4, policy);
    return inner === null ? null : inner.replace(/\)$/, ` embedded in ${embedded.via} ${ip})`);
  }
  for (const [what, list] of V6_FORBIDDEN) if (list.check(addr, 'ipv6')) return `${what} address (${ip})`;
  if (!V6_GLOBAL_UNICAST.check(addr, 'ipv6')) return `a reserved address (${ip})`;
  return null;
}

/** The host as checked and connected to: no brackets, no trailing dot. */
export function hostOf(url: URL): string {
  let host = url.hostname;
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host;
}

/** Syntactic checks only; no DNS. */
export function parseWebhookUrl(raw: string): URL {
  if (raw.length > MAX_URL_LENGTH) throw new UnsafeUrlError(`URL is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeUrlError('URL does not parse');
  }
  if (url.protocol !== 'https:') throw new UnsafeUrlError('scheme must be https');
  if (url.username !== '' || url.password !== '') throw new UnsafeUrlError('credentials in the URL are not allowed');
  if (hostOf(url) === '') throw new UnsafeUrlError('host is empty');
  return url;
}

export type Resolver = (hostname: string) => Promise<string[]>;

export const systemResolver: Resolver = async (hostname) => {
  const results = await dns.lookup(hostname, { all: true, verbatim: true });
  return results.map((r) => r.address);
};

/**
 * Full check of a webhook URL: syntax, then every address the host resolves to. One
 * forbidden address refuses the URL. The returned addresses are the only ones a caller
 * may connect to for this URL (resolve once, connect to what was checked).
 */
export async function checkUrl(
  raw: string,
  policy: AddressPolicy,
  resolve: Resolver = systemResolver,
): Promise<{ url: URL; addresses: string[] }> {
  const url = parseWebhookUrl(raw);
  const host = hostOf(url);
  if (isIP(host)) {
    const reason = forbiddenReason(host, policy);
    if (reason) throw new UnsafeUrlError(`host is ${reason}`);
    return { url, addresses: [host] };
  }
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch {
    throw new UnsafeUrlError('host does not resolve');
  }
  if (!Array.isArray(addresses) || addresses.length === 0) throw new UnsafeUrlError('host does not resolve');
  for (const address of addresses) {
    const reason = forbiddenReason(address, policy);
    if (reason) throw new UnsafeUrlError(`host resolves to ${reason}`);
  }
  return { url, addresses: [...addresses] };
}

/**
 * The check of a provider URL a customer registers (an OpenAI-compatible server): the
 * same address rules as a webhook's, but plain http is accepted when every address of the
 * host is one the operator's allow list names (a model server on the private network
 * often speaks plain http). Returns the checked addresses, as checkUrl does.
 */
export async function checkProviderUrl(raw: string, policy: AddressPolicy, resolve: Resolver = systemResolver, opts: { resolveNames?: boolean } = {}): Promise<{ url: URL; addresses: string[] }> {
  if (raw.length > MAX_URL_LENGTH) throw new UnsafeUrlError(`URL is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeUrlError('URL does not parse');
  }
  if (url.protocol === 'https:') {
    // At registration an https name is not resolved (the provider may be unreachable today); every call checks it.
    if (opts.resolveNames === false && !isIP(hostOf(parseWebhookUrl(raw)))) return { url, addresses: [] };
    return checkUrl(raw, policy, resolve);
  }
  if (url.protocol !== 'http:') throw new UnsafeUrlError('scheme must be https');
  // Plain http: checked as https would be, then every address must be an allow-listed one.
  const httpsForm = new URL(raw);
  httpsForm.protocol = 'https:';
  const checked = await checkUrl(httpsForm.href, policy, resolve);
  const allowed = (a: string) => policy.allow?.check(a.split('%')[0], isIP(a.split('%')[0]) === 6 ? 'ipv6' : 'ipv4') ?? false;
  if (!checked.addresses.every(allowed)) throw new UnsafeUrlError('scheme must be https (plain http only reaches hosts in the operator\'s allow list)');
  return { url, addresses: checked.addresses };
}
