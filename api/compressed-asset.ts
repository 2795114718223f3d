import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';

export type Encoding = 'br' | 'gzip' | 'identity';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/**
 * The encoding to send for an `Accept-Encoding` header (RFC 9110 §12.5.3): brotli when
 * accepted, else gzip, else the bytes as they are. A coding with `q=0` is refused, `*`
 * stands for any coding not named, and no header at all means identity (a client that
 * names nothing may not be able to decode anything).
 */
export function negotiateEncoding(header: string | string[] | undefined): Encoding {
  if (!header) return 'identity';
  const q = new Map<string, number>();
  for (const part of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (!name) continue;
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const value = qParam ? Number(qParam.slice(2)) : 1;
    q.set(name.trim(), Number.isFinite(value) ? value : 0);
  }
  const accepts = (coding: string) => (q.get(coding) ?? (coding === 'gzip' ? q.get('x-gzip') : undefined) ?? q.get('*') ?? 0) > 0;
  if (accepts('br')) return 'br';
  if (accepts('gzip')) return 'gzip';
  return 'identity';
}

/** Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 §13.1.2 asks for GET). */
export function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const bare = (tag: string) => tag.trim().replace(/^W\//, '');
  return header.split(',').some((tag) => bare(tag) === bare(etag));
}

/**
 * A static file served as-is, compressed on demand: each encoding is made once, on the
 * first request that asks for it (never at start, so a process that never serves the
 * file never pays for brotli's best quality), and its bytes kept. Each encoding is its
 * own representation with its own strong ETag; every answer varies on Accept-Encoding.
 */
export class CompressedAsset {
  /** The first 16 hex digits of the SHA-256 of the bytes: the versioned URL's segment and the ETag's root. */
  readonly hash: string;
  private readonly variants = new Map<Encoding, Promise<Buffer>>();

  constructor(
    readonly bytes: Buffer,
    /** The Content-Type, with its charset. */
    private readonly type: string,
  ) {
    this.hash = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
    this.variants.set('identity', Promise.resolve(bytes));
  }

  etag(encoding: Encoding): string {
    return `"${this.hash}${encoding === 'identity' ? '' : `-${encoding === 'br' ? 'br' : 'gz'}`}"`;
  }

  /** The bytes in an encoding (made on first use; a failed compression is forgotten, so the next request tries again). */
  encoded(encoding: Encoding): Promise<Buffer> {
    let v = this.variants.get(encoding);
    if (!v) {
      v =
        encoding === 'br'
          ? brotli(this.bytes, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: zlib.constants.BROTLI_MAX_QUALITY, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: this.bytes.length } })
          : gzip(this.bytes, { level: zlib.constants.Z_BEST_COMPRESSION });
      v.catch(() => this.variants.delete(encoding));
      this.variants.set(encoding, v);
    }
    return v;
  }

  /**
   * Answers a GET or HEAD: the encoding the client accepts best, its ETag, `cacheControl`,
   * `Vary: Accept-Encoding`, nosniff (the bytes are only ever what their type says); 304
   * without a body when If-None-Match names this representation.
   */
  async send(request: FastifyRequest, reply: FastifyReply, cacheControl: string): Promise<FastifyReply> {
    const encoding = negotiateEncoding(request.headers['accept-encoding']);
    const etag = this.etag(encoding);
    reply.header('Cache-Control', cacheControl).header('Vary', 'Accept-Encoding').header('ETag', etag).header('X-Content-Type-Options', 'nosniff');
    if (matchesEtag(request.headers['if-none-match'], etag)) return reply.code(304).send();
    const body = await this.encoded(encoding);
    if (encoding !== 'identity') reply.header('Content-Encoding', encoding);
    return reply.type(this.type).send(body);
  }
}
