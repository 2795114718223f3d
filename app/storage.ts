import path from 'node:path';
import { s3Settings, storageDir, type Config } from './config';
import { LocalBlobStore, type BlobStore } from '../providers/storage/blob-store';
import { S3BlobStore } from '../providers/storage/s3-blob-store';

/** The blob store STORAGE_DRIVER names: a local directory, or an S3-compatible bucket with local temp files. */
export function blobStoreFromConfig(config: Config): BlobStore {
  if (config.STORAGE_DRIVER === 's3') return new S3BlobStore(s3Settings(config), { tmpDir: path.join(storageDir(config), 'tmp') });
  return new LocalBlobStore(storageDir(config));
}
