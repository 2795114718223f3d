import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { BlobGoneError, checkSha256, stageToFile, tempFileIn, type BlobStore, type StagedBlob } from './blob-store';


/** The S3 driver's settings (STORAGE_DRIVER=s3), read from app/config.ts by s3Settings. */
export interface S3Settings {
  bucket: string;
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  /** Absent: the AWS SDK's default credential chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/**
 * Multipart part size (S3's minimum is 5 MiB). An upload holds a few parts at once (the one being filled, the
 * ones in flight: about partSize × (queueSize + 1), ~24 MiB here), whatever the file's size.
 */
export const DEFAULT_PART_SIZE = 8 * 1024 * 1024;
const DEFAULT_QUEUE_SIZE = 2;

export interface S3BlobStoreOptions {
  /** Staged uploads and downloaded copies for extraction live here (local disk). */
  tmpDir: string;
  /** Bytes of one multipart part (at least 5 MiB). */
  partSize?: number;
  /** Parts uploaded at once; memory held is about partSize × (queueSize + 1). */
  queueSize?: number;
}

const isNotFound = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404;
};

/**
 * Blobs in an S3-compatible bucket under `blobs/<sha256>`. Staging stays a local temp
 * file (the hash names the object, so it must be known before the upload starts);
 * `commit` streams that file with a multipart upload, so a 200 MB file never sits in
 * memory, and skips the upload when the object is already there.
 */
export class S3BlobStore implements BlobStore {
  readonly bucket: string;
  private readonly client: S3Client;
  private readonly tmpDir: string;
  private readonly partSize: number;
  private readonly queueSize: number;

  constructor(settings: S3Settings, opts: S3BlobStoreOptions) {
    this.bucket = settings.bucket;
    this.client = new S3Client({
      region: settings.region,
      endpoint: settings.endpoint,
      forcePathStyle: settings.forcePathStyle,
      credentials: settings.credentials,
      // Checksums only where S3 requires them: the SDK's default (CRC32 trailers on every
      // upload) is not understood by every S3-compatible server.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // A stalled connection or a request silent for 30 s fails and is retried by the SDK
      // (3 attempts) instead of holding an upload, an indexing run or a download forever.
      requestHandler: { connectionTimeout: 10_000, requestTimeout: 30_000 },
    });
    this.tmpDir = opts.tmpDir;
    this.partSize = opts.partSize ?? DEFAULT_PART_SIZE;
    this.queueSize = opts.queueSize ?? DEFAULT_QUEUE_SIZE;
    fs.mkdirSync(this.tmpDir, { recursive: true });
  }

  /** The object key of a blob. */
  keyOf(sha256: string): string {
    return `blobs/${checkSha256(sha256)}`;
  }

  stage(source: Readable, maxBytes: number): Promise<StagedBlob> {
    return stageToFile(this.tmpDir, source, maxBytes);
  }

  async commit(staged: StagedBlob): Promise<string> {
    const Key = this.keyOf(staged.sha256);
    try {
      if (!(await this.exists(Key))) {
        const upload = new Upload({
          client: this.client,
          params: { Bucket: this.bucket, Key, Body: fs.createReadStream(staged.tempPath), ContentLength: staged.size },
          partSize: this.partSize,
          queueSize: this.queueSize,
          leavePartsOnError: false,
        });
        await upload.done();
      }
    } finally {
      await fs.promises.rm(staged.tempPath, { force: true });
    }
    return staged.sha256;
  }

  async discard(staged: StagedBlob): Promise<void> {
    await fs.promises.rm(staged.tempPath, { force: true });
  }

  async withLocalFile<T>(sha256: string, fn: (filePath: string) => Promise<T>): Promise<T> {
    const blob = await this.read(sha256);
    if (!blob) throw new BlobGoneError(sha256);
    const file = tempFileIn(this.tmpDir);
    try {
      await pipeline(blob.stream, fs.createWriteStream(file, { flags: 'wx' }));
      return await fn(file);
    } finally {
      await fs.promises.rm(file, { force: true });
    }
  }

  async open(sha256: string): Promise<Readable> {
    const blob = await this.read(sha256);
    if (!blob) throw new BlobGoneError(sha256);
    return blob.stream;
  }

  async read(sha256: string): Promise<{ stream: Readable; size: number } | null> {
    try {
      // The response's headers are in when this resolves: a missing object is known before the caller answers anything.
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.keyOf(sha256) }));
      return { stream: got.Body as Readable, size: got.ContentLength ?? 0 };
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    // DeleteObject of a missing key succeeds: deleting twice is not an error, as with the local driver.
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.keyOf(sha256) }));
  }

  /** Closes the client's connections (tests, shutdown). */
  close(): void {
    this.client.destroy();
  }

  private async exists(Key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}
