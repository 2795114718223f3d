import { ConfigError, loadConfig, s3Settings } from '../../app/config';
import { LocalBlobStore } from '../../providers/storage/blob-store';
import { blobStoreFromConfig } from '../../app/storage';
import { S3BlobStore } from '../../providers/storage/s3-blob-store';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const dir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'storage-config-'));

describe('storage settings', () => {
  test('the default driver is the local directory', () => {
    const config = loadConfig({ CONCIERGE_STORAGE_DIR: dir() });
    expect(config.STORAGE_DRIVER).toBe('local');
    expect(blobStoreFromConfig(config)).toBeInstanceOf(LocalBlobStore);
  });

  test('STORAGE_DRIVER=s3 without a bucket fails at boot, naming the setting', () => {
    expect(() => loadConfig({ STORAGE_DRIVER: 's3' })).toThrow(ConfigError);
    expect(() => loadConfig({ STORAGE_DRIVER: 's3' })).toThrow(/S3_BUCKET: required with STORAGE_DRIVER=s3/);
    expect(() => loadConfig({ STORAGE_DRIVER: 'azure' })).toThrow(/STORAGE_DRIVER/);
  });

  test('one S3 key without the other is refused, and the secret is not repeated in the message', () => {
    let message = '';
    try {
      loadConfig({ STORAGE_DRIVER: 's3', S3_BUCKET: 'b', S3_SECRET_ACCESS_KEY: 'very-secret-value-1234' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/S3_ACCESS_KEY_ID: set both S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, or neither/);
    expect(message).not.toContain('very-secret-value-1234');
  });

  test('path-style addressing defaults to on with a custom endpoint, off without; an explicit value wins', () => {
    const base = { STORAGE_DRIVER: 's3', S3_BUCKET: 'b' };
    expect(s3Settings(loadConfig(base))).toEqual({ bucket: 'b', endpoint: undefined, region: 'us-east-1', forcePathStyle: false, credentials: undefined });
    expect(s3Settings(loadConfig({ ...base, S3_ENDPOINT: 'http://minio:9000' })).forcePathStyle).toBe(true);
    expect(s3Settings(loadConfig({ ...base, S3_ENDPOINT: 'http://minio:9000', S3_FORCE_PATH_STYLE: 'false' })).forcePathStyle).toBe(false);
    expect(s3Settings(loadConfig({ ...base, S3_FORCE_PATH_STYLE: 'true' })).forcePathStyle).toBe(true);
    expect(() => loadConfig({ ...base, S3_FORCE_PATH_STYLE: 'yes' })).toThrow(/S3_FORCE_PATH_STYLE: must be true or false/);
    expect(() => loadConfig({ ...base, S3_ENDPOINT: 'minio:9000' })).toThrow(/S3_ENDPOINT/);
  });

  test('STORAGE_DRIVER=s3 builds the S3 driver with the given bucket, region and keys', () => {
    const config = loadConfig({
      STORAGE_DRIVER: 's3',
      S3_BUCKET: 'uploads',
      S3_REGION: 'eu-west-3',
      S3_ACCESS_KEY_ID: 'AKIDEXAMPLE',
      S3_SECRET_ACCESS_KEY: 'example-secret-key',
      CONCIERGE_STORAGE_DIR: dir(),
    });
    expect(s3Settings(config)).toMatchObject({ region: 'eu-west-3', credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'example-secret-key' } });
    const store = blobStoreFromConfig(config);
    expect(store).toBeInstanceOf(S3BlobStore);
    expect((store as S3BlobStore).bucket).toBe('uploads');
    (store as S3BlobStore).close();
  });
});
