import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { Readable } from 'node:stream';
import { HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { BlobGoneError, BlobTooLargeError, LocalBlobStore, type BlobStore } from '../../providers/storage/blob-store';
import { S3BlobStore } from '../../providers/storage/s3-blob-store';
import { MOTO_CREDENTIALS, startMoto, type MotoServer } from '../support/moto';

/** What a test may look at behind a driver's back: the stored objects and the temp directory. */
interface Driver {
  store: BlobStore;
  tmpDir: string;
  /** The content addresses stored, read from the backend itself (the directory, or the bucket's listing). */
  storedKeys(): Promise<string[]>;
  /** Multipart parts the backend recorded for a blob (S3 only). */
  partsOf?(sha256: string): Promise<number>;
  partSize?: number;
  /** Bytes the store has sent to the backend's server so far (S3 only: counted by a proxy in front of it). */
  sentBytes?(): number;
  close(): Promise<void>;
}

const PART_SIZE = 5 * 1024 * 1024;

/** A TCP proxy in front of `port` on loopback that counts the bytes clients send through it. */
async function countingProxy(port: number): Promise<{ endpoint: string; sent(): number; close(): Promise<void> }> {
  let sent = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => [client, upstream].forEach((x) => x.destroy()));
    }
    client.on('data', (chunk: Buffer) => (sent += chunk.length));
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    sent: () => sent,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function localDriver(): Driver {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'blob-store-local-'));
  const store = new LocalBlobStore(root);
  const walk = (dir: string): string[] =>
    fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [e.name])) : [];
  return {
    store,
    tmpDir: path.join(root, 'tmp'),
    storedKeys: async () => walk(path.join(root, 'blobs')).sort(),
    close: async () => fs.rmSync(root, { recursive: true, force: true }),
  };
}

let moto: MotoServer;
let bucketNo = 0;

async function s3Driver(): Promise<Driver> {
  const bucket = `blobs-test-${++bucketNo}`;
  await moto.createBucket(bucket);
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'blob-store-s3-'));
  const proxy = await countingProxy(Number(new URL(moto.endpoint).port));
  const store = new S3BlobStore(
    { bucket, endpoint: proxy.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: MOTO_CREDENTIALS },
    { tmpDir, partSize: PART_SIZE, queueSize: 1 },
  );
  return {
    store,
    tmpDir,
    partSize: PART_SIZE,
    sentBytes: proxy.sent,
    storedKeys: async () => {
      const listed = await moto.client.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (listed.Contents ?? []).map((o) => o.Key!.replace(/^blobs\//, '')).sort();
    },
    // A multipart object's ETag is md5-of-part-md5s followed by "-<number of parts>"; a single PUT has no suffix.
    partsOf: async (sha256) => {
      const head = await moto.client.send(new HeadObjectCommand({ Bucket: bucket, Key: `blobs/${sha256}` }));
      const m = /-(\d+)"?$/.exec(head.ETag ?? '');
      return m ? Number(m[1]) : 1;
    },
    close: async () => {
      store.close();
      await proxy.close();
      fs.rmSync(tmpDir, { recursive: true, force: true });
    },
  };
}

beforeAll(async () => {
  moto = await startMoto();
}, 60_000);
afterAll(async () => {
  await moto?.stop();
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const readAll = async (s: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};
const stageBytes = (store: BlobStore, bytes: Buffer, max = 1024 * 1024) => store.stage(Readable.from([bytes]), max);

/** `size` bytes made on the fly, 64 KiB at a time (never whole in memory), with their hash. */
function generated(size: number, onChunk?: (made: number) => void): { stream: Readable; digest: Promise<string> } {
  const hash = createHash('sha256');
  let resolve!: (d: string) => void;
  const digest = new Promise<string>((r) => (resolve = r));
  let made = 0;
  const stream = new Readable({
    read() {
      if (made >= size) {
        resolve(hash.digest('hex'));
        this.push(null);
        return;
      }
      const n = Math.min(64 * 1024, size - made);
      // Random bytes: nothing along the way can compress or deduplicate them.
      const chunk = randomBytes(n);
      hash.update(chunk);
      made += n;
      onChunk?.(made);
      this.push(chunk);
    },
  });
  return { stream, digest };
}

describe.each([
  ['local disk', async () => localDriver()],
  ['S3 (moto server)', () => s3Driver()],
])('blob store: %s', (_name, make) => {
  let d: Driver;
  beforeEach(async () => {
    d = await make();
  });
  afterEach(async () => {
    await d.close();
  });

  test('stage + commit + read/open round-trips the bytes under their sha256, leaving no temp file', async () => {
    const bytes = Buffer.from(`round trip ${Date.now()}`);
    const staged = await stageBytes(d.store, bytes);
    expect(staged).toMatchObject({ sha256: sha(bytes), size: bytes.length });
    expect(await d.storedKeys()).toEqual([]);
    expect(await d.store.commit(staged)).toBe(sha(bytes));
    expect(await d.storedKeys()).toEqual([sha(bytes)]);
    expect(fs.readdirSync(d.tmpDir)).toEqual([]);

    const got = await d.store.read(sha(bytes));
    expect(got?.size).toBe(bytes.length);
    expect(await readAll(got!.stream)).toEqual(bytes);
    expect(await readAll(await d.store.open(sha(bytes)))).toEqual(bytes);
  });

  test('the same bytes committed twice are stored once', async () => {
    const bytes = Buffer.from('same bytes, two names');
    await d.store.commit(await stageBytes(d.store, bytes));
    await d.store.commit(await stageBytes(d.store, bytes));
    await d.store.commit(await stageBytes(d.store, Buffer.from('other bytes')));
    expect(await d.storedKeys()).toEqual([sha(bytes), sha(Buffer.from('other bytes'))].sort());
    expect(fs.readdirSync(d.tmpDir)).toEqual([]);
  });

  test('staging past the limit fails and leaves nothing; a discarded stage is never stored', async () => {
    await expect(stageBytes(d.store, Buffer.alloc(2048, 1), 1024)).rejects.toBeInstanceOf(BlobTooLargeError);
    const staged = await stageBytes(d.store, Buffer.from('changed my mind'));
    await d.store.discard(staged);
    expect(fs.readdirSync(d.tmpDir)).toEqual([]);
    expect(await d.storedKeys()).toEqual([]);
  });

  test('a blob that is not stored: read gives null, open and withLocalFile throw BlobGoneError', async () => {
    const missing = sha(Buffer.from('never stored'));
    expect(await d.store.read(missing)).toBeNull();
    await expect(d.store.open(missing)).rejects.toBeInstanceOf(BlobGoneError);
    const fn = jest.fn(async () => 'ran');
    await expect(d.store.withLocalFile(missing, fn)).rejects.toBeInstanceOf(BlobGoneError);
    expect(fn).not.toHaveBeenCalled();
  });

  test('delete removes the blob (then it reads as gone); deleting again is not an error', async () => {
    const bytes = Buffer.from(`to delete ${Date.now()}`);
    const keep = Buffer.from('kept');
    await d.store.commit(await stageBytes(d.store, bytes));
    await d.store.commit(await stageBytes(d.store, keep));
    await d.store.delete(sha(bytes));
    expect(await d.storedKeys()).toEqual([sha(keep)]);
    expect(await d.store.read(sha(bytes))).toBeNull();
    await expect(d.store.delete(sha(bytes))).resolves.toBeUndefined();
  });

  test('withLocalFile hands a readable local file holding the bytes, for the duration of the call only', async () => {
    const bytes = Buffer.from('# Heading\n\nextract me');
    await d.store.commit(await stageBytes(d.store, bytes));
    let seen = '';
    const result = await d.store.withLocalFile(sha(bytes), async (file) => {
      seen = file;
      expect(fs.readFileSync(file)).toEqual(bytes);
      return 42;
    });
    expect(result).toBe(42);
    // The local driver hands its own file (still stored); a remote one a temp copy, removed afterwards.
    if (d.partsOf) expect(fs.existsSync(seen)).toBe(false);
    else expect(fs.existsSync(seen)).toBe(true);
    expect(fs.readdirSync(d.tmpDir)).toEqual([]);
    // Failures of the callback propagate, and still clean up.
    await expect(d.store.withLocalFile(sha(bytes), async () => Promise.reject(new Error('extractor failed')))).rejects.toThrow('extractor failed');
    expect(fs.readdirSync(d.tmpDir)).toEqual([]);
  });

  test('a 40 MB file streams through stage and commit (multipart on S3): the process never holds more than a few parts of it', async () => {
    // Measured as read-ahead, which does not depend on when the garbage collector runs: while staging, bytes
    // produced by the source and not yet on disk; while committing, bytes read from the staged file and not
    // yet sent to the S3 server (counted by a proxy in front of it). Reading the whole file first would make
    // either one the whole 40 MiB, twice the bound.
    const size = 40 * 1024 * 1024;
    const bound = 4 * PART_SIZE;
    const onDisk = () => fs.readdirSync(d.tmpDir).reduce((n, f) => n + fs.statSync(path.join(d.tmpDir, f)).size, 0);
    let stageAhead = 0;
    const src = generated(size, (made) => (stageAhead = Math.max(stageAhead, made - onDisk())));
    const staged = await d.store.stage(src.stream, size);
    expect(staged.sha256).toBe(await src.digest);
    expect(staged.size).toBe(size);
    expect(stageAhead).toBeLessThan(bound);

    let commitAhead = 0;
    if (d.sentBytes) {
      const reads: fs.ReadStream[] = [];
      const original = fs.createReadStream;
      const spy = jest.spyOn(fs, 'createReadStream').mockImplementation(((...args: Parameters<typeof original>) => {
        const stream = original(...args);
        if (args[0] === staged.tempPath) reads.push(stream);
        return stream;
      }) as typeof original);
      const sentBefore = d.sentBytes();
      const measure = () => {
        const read = reads.reduce((n, r) => n + r.bytesRead, 0);
        commitAhead = Math.max(commitAhead, read - (d.sentBytes!() - sentBefore));
      };
      const timer = setInterval(measure, 5);
      try {
        await d.store.commit(staged);
      } finally {
        clearInterval(timer);
        spy.mockRestore();
      }
      measure();
      expect(reads).toHaveLength(1);
      expect(reads[0].bytesRead).toBe(size);
      expect(d.sentBytes() - sentBefore).toBeGreaterThan(size);
      expect(await d.partsOf!(staged.sha256)).toBe(Math.ceil(size / d.partSize!));
    } else {
      await d.store.commit(staged);
    }
    expect(commitAhead).toBeLessThan(bound);

    const got = await d.store.read(staged.sha256);
    expect(got?.size).toBe(size);
    const hash = createHash('sha256');
    for await (const c of got!.stream) hash.update(c as Buffer);
    expect(hash.digest('hex')).toBe(staged.sha256);
  }, 240_000);
});
