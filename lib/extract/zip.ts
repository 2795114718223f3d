/**
 * Guarded access to zip-based documents (OOXML, ODF). yauzl reads the central directory
 * and inflates entries as streams; `validateEntrySizes` makes it fail as soon as an entry
 * inflates past the size its header declares, so the declared sizes can be trusted for
 * the total cap below. A zip bomb therefore fails before anything is held in memory:
 * first on the declared total, else (lying headers) on the first entry that overflows.
 */
import yauzl from 'yauzl';
import { ExtractionError, type ChildLimits } from './types';

const MB = 1024 * 1024;

export interface ZipEntryInfo {
  name: string;
  compressedSize: number;
  uncompressedSize: number;
  entry: yauzl.Entry;
}

export interface GuardedZip {
  entries: Map<string, ZipEntryInfo>;
  /** Reads one entry fully (size-validated). */
  read(name: string): Promise<Buffer | null>;
  /** Inflates every entry once, discarding the data, to prove the sizes are honest. */
  verifyAll(): Promise<void>;
  close(): void;
}

function bombError(detail: string): ExtractionError {
  return new ExtractionError('archive expands beyond the size limit (possible zip bomb)', detail);
}

function mapZipError(err: unknown): ExtractionError {
  if (err instanceof ExtractionError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  if (/too many bytes in the stream|expected \d+\. got/i.test(msg)) return bombError(msg);
  if (/encrypted/i.test(msg)) return new ExtractionError('document is encrypted', msg);
  return new ExtractionError('document is corrupt (unreadable zip container)', msg);
}

export async function openGuardedZip(buf: Buffer, limits: Pick<ChildLimits, 'maxArchiveBytes' | 'maxArchiveEntries'>): Promise<GuardedZip> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(buf, { lazyEntries: true, validateEntrySizes: true, strictFileNames: false, decodeStrings: true });
  } catch (err) {
    throw mapZipError(err);
  }
  const entries = new Map<string, ZipEntryInfo>();
  let total = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('entry', (entry: yauzl.Entry) => {
        if (entries.size >= limits.maxArchiveEntries) {
          reject(bombError(`more than ${limits.maxArchiveEntries} entries`));
          return;
        }
        total += entry.uncompressedSize;
        if (total > limits.maxArchiveBytes) {
          reject(bombError(`declared uncompressed size exceeds ${Math.round(limits.maxArchiveBytes / MB)} MB (at ${entry.fileName})`));
          return;
        }
        if (!entry.fileName.endsWith('/')) {
          entries.set(entry.fileName, { name: entry.fileName, compressedSize: entry.compressedSize, uncompressedSize: entry.uncompressedSize, entry });
        }
        zip.readEntry();
      });
      zip.on('end', () => resolve());
      zip.on('error', reject);
      zip.readEntry();
    });
  } catch (err) {
    zip.close();
    throw mapZipError(err);
  }

  const inflate = async (info: ZipEntryInfo, keep: boolean): Promise<Buffer | null> => {
    try {
      const stream = await zip.openReadStreamPromise(info.entry);
      const chunks: Buffer[] = [];
      for await (const chunk of stream) if (keep) chunks.push(chunk as Buffer);
      return keep ? Buffer.concat(chunks) : null;
    } catch (err) {
      throw mapZipError(err);
    }
  };

  return {
    entries,
    async read(name) {
      const info = entries.get(name);
      return info ? inflate(info, true) : null;
    },
    async verifyAll() {
      for (const info of entries.values()) await inflate(info, false);
    },
    close() {
      zip.close();
    },
  };
}

/**
 * For documents handed to a library that unzips on its own (mammoth, SheetJS): check the
 * container first, so a bomb is refused before the library inflates it in memory.
 */
export async function assertZipSafe(buf: Buffer, limits: Pick<ChildLimits, 'maxArchiveBytes' | 'maxArchiveEntries'>): Promise<void> {
  const zip = await openGuardedZip(buf, limits);
  try {
    await zip.verifyAll();
  } finally {
    zip.close();
  }
}
