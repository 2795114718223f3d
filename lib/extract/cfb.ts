/**
 * A small, bounded reader of Compound File Binary (OLE2) containers: just enough to list
 * the names of the root storage's children, which tell a Word 97 document
 * ("WordDocument"), an Excel 97 workbook ("Workbook"/"Book") and an Outlook message
 * ("__properties_version1.0", "__substg1.0_…") apart. It reads only the header, the FAT
 * sectors it needs and the directory chain, with caps on every loop, so a hostile file
 * cannot make the sniffer (which runs in the API process) read much or spin.
 */

export type ReadAt = (offset: number, length: number) => Promise<Buffer>;

const SIGNATURE = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
const MAX_DIR_SECTORS = 512;
const MAX_DIFAT_SECTORS = 64;
const MAX_ENTRIES_VISITED = 20_000;
const ENDOFCHAIN = 0xfffffffe;
const NOSTREAM = 0xffffffff;

export function isCfb(head: Uint8Array): boolean {
  return head.length >= 8 && SIGNATURE.equals(Buffer.from(head.subarray(0, 8)));
}

/** Names of the root storage's direct children, or null if the container is unreadable. */
export async function cfbRootNames(readAt: ReadAt, size: number): Promise<string[] | null> {
  try {
    const header = await readAt(0, 512);
    if (header.length < 512 || !isCfb(header)) return null;
    const shift = header.readUInt16LE(0x1e);
    if (shift !== 9 && shift !== 12) return null;
    const ssz = 1 << shift;
    const perSector = ssz / 4;
    const sectorOffset = (s: number) => (s + 1) * ssz;
    const readSector = async (s: number): Promise<Buffer | null> => {
      const off = sectorOffset(s);
      if (s >= 0xfffffffa || off + ssz > size + ssz) return null; // allow a short last sector
      const b = await readAt(off, ssz);
      return b.length ? b : null;
    };

    // FAT sector locations: 109 in the header, the rest in the DIFAT chain (read lazily).
    const difat: number[] = [];
    for (let i = 0; i < 109; i++) difat.push(header.readUInt32LE(0x4c + i * 4));
    let nextDifat = header.readUInt32LE(0x44);
    let difatRead = 0;
    const fatSectorLocation = async (index: number): Promise<number | null> => {
      while (index >= difat.length && nextDifat < 0xfffffffa && difatRead < MAX_DIFAT_SECTORS) {
        const sec = await readSector(nextDifat);
        if (!sec) return null;
        for (let i = 0; i < perSector - 1; i++) difat.push(sec.readUInt32LE(i * 4));
        nextDifat = sec.readUInt32LE((perSector - 1) * 4);
        difatRead++;
      }
      return index < difat.length ? difat[index] : null;
    };
    const fatCache = new Map<number, Buffer>();
    const nextSector = async (s: number): Promise<number | null> => {
      const idx = Math.floor(s / perSector);
      let fat = fatCache.get(idx);
      if (!fat) {
        const loc = await fatSectorLocation(idx);
        if (loc === null || loc >= 0xfffffffa) return null;
        const sec = await readSector(loc);
        if (!sec) return null;
        fat = sec;
        fatCache.set(idx, fat);
      }
      return fat.readUInt32LE((s % perSector) * 4);
    };

    // The directory chain.
    const entries: Array<{ name: string; left: number; right: number; child: number }> = [];
    const seen = new Set<number>();
    let s = header.readUInt32LE(0x30);
    while (s !== ENDOFCHAIN && s < 0xfffffffa && seen.size < MAX_DIR_SECTORS && !seen.has(s)) {
      seen.add(s);
      const sec = await readSector(s);
      if (!sec) break;
      for (let o = 0; o + 128 <= sec.length; o += 128) {
        const nameLen = Math.min(sec.readUInt16LE(o + 0x40), 64);
        const name = sec.toString('utf16le', o, o + Math.max(0, nameLen - 2));
        entries.push({ name, left: sec.readUInt32LE(o + 0x44), right: sec.readUInt32LE(o + 0x48), child: sec.readUInt32LE(o + 0x4c) });
      }
      const next = await nextSector(s);
      if (next === null) break;
      s = next;
    }
    if (!entries.length) return null;

    // Walk the root's child tree (a red-black tree linked by left/right siblings).
    const names: string[] = [];
    const stack = [entries[0].child];
    const visited = new Set<number>();
    while (stack.length && visited.size < MAX_ENTRIES_VISITED) {
      const id = stack.pop()!;
      if (id === NOSTREAM || id >= entries.length || visited.has(id)) continue;
      visited.add(id);
      const e = entries[id];
      names.push(e.name);
      stack.push(e.left, e.right);
    }
    return names;
  } catch {
    return null;
  }
}

export type CfbKind = 'doc' | 'xls' | 'msg';

/** Classifies a CFB container by its root entries; null for other OLE files (PPT, MSI…). */
export function classifyCfb(rootNames: string[]): CfbKind | null {
  const names = new Set(rootNames);
  if (names.has('__properties_version1.0') || rootNames.some((n) => n.startsWith('__substg1.0_'))) return 'msg';
  if (names.has('WordDocument')) return 'doc';
  if (names.has('Workbook') || names.has('Book')) return 'xls';
  return null;
}
