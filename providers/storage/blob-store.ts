import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable } from 'node:stream';
import { BlobTooLargeError, BlobGoneError, type StagedBlob, type BlobStore } from '../../domain/ports/blob-store';
export { BlobTooLargeError, BlobGoneError, type StagedBlob, type BlobStore } from '../../domain/ports/blob-store';

export function checkSha256(sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error('not a sha256');
  return sha256;
}

/** A fresh, unused file name in `dir` (created with `wx`, so two writers never share one). */
export function tempFileIn(dir: string): string {
  return path.join(dir, `${Date.now()}-${randomBytes(8).toString('hex')}`);
}

/** Streams `source` into a new file in `tmpDir`, hashing and counting; past `maxBytes` the file is removed. */
export async function stageToFile(tmpDir: string, source: Readable, maxBytes: number): Promise<StagedBlob> {
  const tempPath = tempFileIn(tmpDir);
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

export class LocalBlobStore implements BlobStore {
  private readonly tmpDir: string;

  constructor(readonly root: string) {
    this.tmpDir = path.join(root, 'tmp');
    fs.mkdirSync(this.tmpDir, { recursive: true });
  }

  stage(source: Readable, maxBytes: number): Promise<StagedBlob> {
    return stageToFile(this.tmpDir, source, maxBytes);
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

  /** Where the blob lives on disk (this driver only; callers go through withLocalFile). */
  pathOf(sha256: string): string {
    checkSha256(sha256);
    return path.join(this.root, 'blobs', sha256.slice(0, 2), sha256.slice(2, 4), sha256);
  }

  async withLocalFile<T>(sha256: string, fn: (filePath: string) => Promise<T>): Promise<T> {
    const file = this.pathOf(sha256);
    if (!fs.existsSync(file)) throw new BlobGoneError(sha256);
    return fn(file);
  }

  async open(sha256: string): Promise<Readable> {
    const blob = await this.read(sha256);
    if (!blob) throw new BlobGoneError(sha256);
    return blob.stream;
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
