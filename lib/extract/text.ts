/** Text decoding shared by the sniffer (is this text?) and the extractors (decode it). */

export type TextEncoding = 'utf-8' | 'utf-16le' | 'utf-16be' | 'windows-1252';

/** Share of C0 control characters (other than tab, CR, LF, FF, ESC) tolerated in text. */
const MAX_CONTROL_RATIO = 0.01;

function bomEncoding(buf: Uint8Array): { encoding: TextEncoding; bom: number } | null {
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) return { encoding: 'utf-8', bom: 3 };
  if (buf.length >= 2 && buf[0] === 0xff && buf[1] === 0xfe) return { encoding: 'utf-16le', bom: 2 };
  if (buf.length >= 2 && buf[0] === 0xfe && buf[1] === 0xff) return { encoding: 'utf-16be', bom: 2 };
  return null;
}

function controlRatio(text: string): number {
  if (!text.length) return 0;
  let bad = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0) return 1; // a NUL never occurs in text
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0x0c && c !== 0x1b) || c === 0x7f) bad++;
  }
  return bad / text.length;
}

/**
 * Decides whether `sample` (the start of a file, possibly cut mid-character) is text and
 * in which encoding: UTF-8 (BOM optional), UTF-16 with a BOM, or — when it is not valid
 * UTF-8 but has no NULs and hardly any control characters — Windows-1252, which decodes
 * any byte (older Western text files). Returns null for binary data.
 */
export function detectTextEncoding(sample: Uint8Array): TextEncoding | null {
  const bom = bomEncoding(sample);
  if (bom) {
    try {
      const text = new TextDecoder(bom.encoding, { fatal: true }).decode(sample.subarray(bom.bom), { stream: true });
      return controlRatio(text) <= MAX_CONTROL_RATIO ? bom.encoding : null;
    } catch {
      return null;
    }
  }
  try {
    // stream: true tolerates a multi-byte character cut at the end of the sample.
    const text = new TextDecoder('utf-8', { fatal: true }).decode(sample, { stream: true });
    return controlRatio(text) <= MAX_CONTROL_RATIO ? 'utf-8' : null;
  } catch {
    // Not UTF-8. Accept a legacy 8-bit text only if it is clearly not binary.
    if (sample.includes(0)) return null;
    const text = new TextDecoder('windows-1252').decode(sample);
    return controlRatio(text) <= MAX_CONTROL_RATIO ? 'windows-1252' : null;
  }
}

/** Decodes a whole text file (lenient: invalid sequences become U+FFFD). */
export function decodeText(buf: Uint8Array): { text: string; encoding: TextEncoding | null } {
  const encoding = detectTextEncoding(buf.subarray(0, 1024 * 1024));
  const bom = bomEncoding(buf);
  const text = new TextDecoder(encoding ?? 'utf-8').decode(bom ? buf.subarray(bom.bom) : buf);
  return { text, encoding };
}
