import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable } from 'node:stream';

/** A blob written to temporary storage, hashed on the way, not yet committed. */
export interface StagedBlob {
  tempPath: string;
  sha256: string;
  size: number;
}

/**
 * Where uploaded bytes live. Content-addressed by SHA-256: the same bytes are stored
 * once, whatever their names. Writes stream (never buffered whole); a blob becomes
 * visible only when committed, so a failed upload leaves nothing behind.
 */
export interface BlobStore {
  /** Streams `source` to a temporary file, hashing as it goes; fails past `maxBytes`. */
  stage(source: Readable, maxBytes: number): Promise<StagedBlob>;
  /** Moves a staged blob to its content address (a no-op when those bytes are already stored). */
  commit(staged: StagedBlob): Promise<string>;
  discard(staged: StagedBlob): Promise<void>;
  /** A local path to read the blob from (extractors need a file). */
  pathOf(sha256: string): string;
  open(sha256: string): Readable;
  /**
   * The blob opened for reading with its size, or null when it is not stored (deleted,
   * or a link that outlived its bytes): callers answer that in their own envelope
   * instead of a stream that fails after the headers went out.
   */
  read(sha256: string): Promise<{ stream: Readable; size: number } | null>;
  delete(sha256: string): Promise<void>;
}

export class BlobTooLargeError extends Error {}

export class LocalBlobStore implements BlobStore {
  constructor(readonly root: string) {
    fs.mkdirSync(path.join(root, 'tmp'), { recursive: true });
  }

  async stage(source: Readable, maxBytes: number): Promise<StagedBlob> {
    const tempPath = path.join(this.root, 'tmp', `${Date.now()}-${randomBytes(8).toString('hex')}`);
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > maxBytes) return done(new BlobTooLargeError(`larger than ${maxBytes} bytes`));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    try {
      await pipeline(source, meter, fs.createWriteStream(tempPath, { flags: 'wx' }));
    } catch (err) {
      await fs.promises.rm(tempPath, { force: true });
      throw err;
    }
    return { tempPath, sha256: hash.digest('hex'), size };
  }

  async commit(staged: StagedBlob): Promise<string> {
    const dest = this.pathOf(staged.sha256);
    await fs.promises.mkdir(path.dirname(dest), { recursive: true });
    if (fs.existsSync(dest)) await fs.promises.rm(staged.tempPath, { force: true });
    else await fs.promises.rename(staged.tempPath, dest);
    return staged.sha256;
  }

  async discard(staged: StagedBlob): Promise<void> {
    await fs.promises.rm(staged.tempPath, { force: true });
  }

  pathOf(sha256: string): string {
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error('not a sha256');
    return path.join(this.root, 'blobs', sha256.slice(0, 2), sha256.slice(2, 4), sha256);
  }

  open(sha256: string): Readable {
    return fs.createReadStream(this.pathOf(sha256));
  }

  async read(sha256: string): Promise<{ stream: Readable; size: number } | null> {
    let handle: fs.promises.FileHandle;
    try {
      // Opened before anything is answered; the stream reads the same descriptor, so a delete in between cannot break it.
      handle = await fs.promises.open(this.pathOf(sha256), 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    try {
      const { size } = await handle.stat();
      return { stream: handle.createReadStream(), size };
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    await fs.promises.rm(this.pathOf(sha256), { force: true });
  }
}
