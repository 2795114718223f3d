/** Storage's port: where uploaded bytes live (providers/storage/: a local directory or S3). */
import type { Readable } from 'node:stream';

/** A blob written to temporary storage, hashed on the way, not yet committed. */
export interface StagedBlob {
  tempPath: string;
  sha256: string;
  size: number;
}

/**
 * Where uploaded bytes live. Content-addressed by SHA-256: the same bytes are stored
 * once, whatever their names. Writes stream (never buffered whole); a blob becomes
 * visible only when committed, so a failed upload leaves nothing behind. Two drivers:
 * LocalBlobStore (a directory, the embedded default) and S3BlobStore (s3-blob-store.ts).
 * Who deletes a blob is the callers' business (reference counting in domain/kb/files.ts).
 */
export interface BlobStore {
  /** Streams `source` to a local temporary file, hashing as it goes; fails past `maxBytes`. */
  stage(source: Readable, maxBytes: number): Promise<StagedBlob>;
  /** Moves a staged blob to its content address (a no-op when those bytes are already stored). */
  commit(staged: StagedBlob): Promise<string>;
  discard(staged: StagedBlob): Promise<void>;
  /**
   * Runs `fn` with a local file holding the blob (extractors need a file) and returns what
   * it returns. The file exists only while `fn` runs: a remote driver downloads it to a
   * temporary file and removes it afterwards. A blob that is not stored: BlobGoneError.
   */
  withLocalFile<T>(sha256: string, fn: (filePath: string) => Promise<T>): Promise<T>;
  /** The blob's bytes as a stream; a blob that is not stored: BlobGoneError (before any byte is read). */
  open(sha256: string): Promise<Readable>;
  /**
   * The blob opened for reading with its size, or null when it is not stored (deleted,
   * or a link that outlived its bytes): callers answer that in their own envelope
   * instead of a stream that fails after the headers went out.
   */
  read(sha256: string): Promise<{ stream: Readable; size: number } | null>;
  /** Removes the blob; removing one that is not stored is not an error. */
  delete(sha256: string): Promise<void>;
}

export class BlobTooLargeError extends Error {}

/** The blob is not stored (deleted, or never committed). */
export class BlobGoneError extends Error {
  constructor(readonly sha256: string) {
    super(`blob ${sha256} is not stored`);
  }
}
