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

/** Whitespace as a regex's `\s` reads it: what may split a form ("a b c", a line-wrapped block). */
const isSpace = (c: string) => /\s/.test(c);

/**
 * `text` with every form of `secret` replaced by `[redacted]`. With `maxLength`, only the
 * first `maxLength` characters are returned, cut after redaction so that a secret straddling
 * the cut is still found whole (and the work stays bounded for a huge body).
 *
 * The forms are found in the text with its whitespace left out (so "a b c" and a wrapped
 * block match too), by plain substring search, leftmost first and the longest form where
 * several start at once; each match is replaced from its first character to its last in the
 * original text. No regex is built from the secret: one from a secret of thousands of
 * characters (8 KiB tokens are accepted) is too large for the engine to compile.
 */
export function redactSecret(text: string, secret: string | undefined | null, opts: { maxLength?: number } = {}): string {
  const limit = opts.maxLength;
  if (!secret) return limit === undefined ? text : text.slice(0, limit);
  // Room for the longest form (hex: two characters a byte, whitespace between each) past the cut.
  const window = limit === undefined ? text : text.slice(0, limit + 6 * Buffer.byteLength(secret) + 16);
  const positions: number[] = [];
  let compact = '';
  for (let i = 0; i < window.length; i++) {
    if (isSpace(window[i])) continue;
    positions.push(i);
    compact += window[i];
  }
  const matches: Array<{ start: number; length: number }> = [];
  for (const form of forms(secret).map((f) => [...f].filter((c) => !isSpace(c)).join(''))) {
    if (!form) continue;
    for (let at = compact.indexOf(form); at !== -1; at = compact.indexOf(form, at + 1)) matches.push({ start: at, length: form.length });
  }
  matches.sort((a, b) => a.start - b.start || b.length - a.length);
  let out = '';
  let copied = 0;
  let end = 0;
  for (const m of matches) {
    if (m.start < end) continue;
    end = m.start + m.length;
    out += window.slice(copied, positions[m.start]) + MARK;
    copied = positions[end - 1] + 1;
  }
  out += window.slice(copied);
  return limit === undefined ? out : out.slice(0, limit);
}
