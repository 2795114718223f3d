/**
 * Removes a secret from text a provider sent back (an error body, a tool's output) before it
 * is stored or shown: the secret itself and the forms a server echoing it may use — base64
 * (standard and URL-safe, also where the secret sits inside a longer encoded value such as
 * `base64("Bearer <token>")`), hex and percent-encoding — each also when whitespace splits it
 * (spaces between characters, a line-wrapped base64 block).
 */

const MARK = '[redacted]';
/** Encoded fragments shorter than this are left alone: they would match ordinary text. */
const MIN_FRAGMENT = 6;

/**
 * The base64 characters that depend on the secret alone, for each of the three byte
 * alignments it can have inside a longer encoded value (the characters shared with the
 * neighbouring bytes differ from one context to the next, so they are left out).
 */
function base64Fragments(secret: Buffer): string[] {
  const out: string[] = [];
  for (let k = 0; k < 3; k++) {
    const encoded = Buffer.concat([Buffer.alloc(k), secret]).toString('base64');
    const from = Math.ceil((8 * k) / 6);
    const to = Math.floor((8 * (k + secret.length)) / 6);
    out.push(encoded.slice(from, to));
  }
  return out;
}

/** Every spelling of `secret` to remove, longest first (so a longer form wins over a part of it). */
function forms(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const encoded = new Set<string>();
  for (const b64 of base64Fragments(bytes)) {
    encoded.add(b64);
    encoded.add(b64.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  const hex = bytes.toString('hex');
  encoded.add(hex);
  encoded.add(hex.toUpperCase());
  encoded.add(encodeURIComponent(secret));
  const all = [secret, ...[...encoded].filter((f) => f.length >= MIN_FRAGMENT && f !== secret)];
  return all.sort((a, b) => b.length - a.length);
}

const escape = (c: string) => c.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/**
 * `text` with every form of `secret` replaced by `[redacted]`. With `maxLength`, only the
 * first `maxLength` characters are returned, cut after redaction so that a secret straddling
 * the cut is still found whole (and the work stays bounded for a huge body).
 */
export function redactSecret(text: string, secret: string | undefined | null, opts: { maxLength?: number } = {}): string {
  const limit = opts.maxLength;
  if (!secret) return limit === undefined ? text : text.slice(0, limit);
  // Room for the longest form (hex: two characters a byte, whitespace between each) past the cut.
  const window = limit === undefined ? text : text.slice(0, limit + 6 * Buffer.byteLength(secret) + 16);
  // Each form's characters with optional whitespace between them: "a b c" and a wrapped block match too.
  // A literal after every `\s*` keeps matching linear per start position (no nested quantifiers).
  const pattern = new RegExp(forms(secret).map((f) => [...f].map(escape).join('\\s*')).join('|'), 'g');
  const out = window.replace(pattern, MARK);
  return limit === undefined ? out : out.slice(0, limit);
}
