import { exactTopK, WorkspaceVectors, type VectorRow } from '../../domain/kb/dense-index';
import { prng } from '../../dev/fakes/prose';

const DIM = 384;

/** Seeded, so a failure can be replayed. */
const rand = prng(42);
/** Box-Muller, both values of each pair used (the test makes millions). */
let spare: number | null = null;
function gauss(): number {
  if (spare !== null) {
    const g = spare;
    spare = null;
    return g;
  }
  const r = Math.sqrt(-2 * Math.log(rand() || 1e-12));
  const a = 2 * Math.PI * rand();
  spare = r * Math.sin(a);
  return r * Math.cos(a);
}
function unit(v: Float32Array): Float32Array {
  let sq = 0;
  for (let i = 0; i < v.length; i++) sq += v[i] * v[i];
  const n = Math.sqrt(sq);
  for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}
const centroids = Array.from({ length: 64 }, () => unit(Float32Array.from({ length: DIM }, gauss)));
const near = (noise = 1) => unit(Float32Array.from(centroids[Math.floor(rand() * centroids.length)], (x) => x + (noise / Math.sqrt(DIM)) * gauss()));

/** `files` files of `per` rows each; file f lies in folder `fld_{f % folders}` (`null` for folder 0). */
function rows(files: number, per: number, folders: number, make: () => Float32Array = near, tag = 'a'): VectorRow[] {
  const out: VectorRow[] = [];
  for (let f = 0; f < files; f++) {
    for (let r = 0; r < per; r++) {
      const v = make();
      out.push({
        id: `psg_${tag}${f}_${r}`,
        file_id: `file_${tag}${f}`,
        document_id: `doc_${tag}${f}`,
        folder_id: f % folders === 0 ? null : `fld_${f % folders}`,
        embedding: Buffer.from(v.buffer, v.byteOffset, v.byteLength),
        embedding_dim: DIM,
      });
    }
  }
  return out;
}

function build(rs: VectorRow[]): WorkspaceVectors {
  const v = new WorkspaceVectors(DIM, rs.length);
  v.append(rs);
  return v;
}

/** The plain scan's top k as passage ids, with its keep function built from the same filter. */
function reference(v: WorkspaceVectors, q: Float32Array, k: number, filter: { folders?: Set<string>; fileId?: string } = {}): string[] {
  const keep = (i: number) => (!filter.folders || filter.folders.has(v.folderId(i) ?? '')) && (filter.fileId === undefined || v.fileId(i) === filter.fileId);
  return exactTopK(v, q, k, keep).map((h) => v.ids[h.i]);
}

describe('WorkspaceVectors: SIMD search gives the exact scan’s top k', () => {
  const v = build(rows(200, 100, 50)); // 20,000 rows; each named folder holds 2%, the root 2%
  const queries = Array.from({ length: 25 }, () => near());

  test('no filter: the int8 pass decides (proven), and agrees with the plain scan', () => {
    const before = { ...v.counts };
    for (const q of queries) expect(v.search(q, 50).map((h) => h.id)).toEqual(reference(v, q, 50));
    expect(v.counts.int8 - before.int8).toBeGreaterThan(queries.length * 0.8);
  });

  test('a small folder (gathered float32 scan), a large folder set (int8 pass over all rows, filtered) and one file', () => {
    const small = new Set(['fld_7']);
    const large = new Set(Array.from({ length: 20 }, (_, i) => `fld_${i + 1}`)); // 40%
    const before = { ...v.counts };
    for (const q of queries) {
      expect(v.search(q, 50, { folders: small }).map((h) => h.id)).toEqual(reference(v, q, 50, { folders: small }));
      expect(v.search(q, 50, { folders: large }).map((h) => h.id)).toEqual(reference(v, q, 50, { folders: large }));
      expect(v.search(q, 50, { fileId: 'file_a7' }).map((h) => h.id)).toEqual(reference(v, q, 50, { fileId: 'file_a7' }));
      expect(v.search(q, 5, { folders: small, fileId: 'file_a8' })).toEqual([]);
    }
    expect(v.counts.int8 - before.int8).toBeGreaterThan(0);
    expect(v.search(queries[0], 50, { folders: new Set(['fld_unknown']) })).toEqual([]);
    expect(v.search(queries[0], 50, { fileId: 'file_unknown' })).toEqual([]);
  });

  test('scores are the dot products, best first', () => {
    const hits = v.search(queries[0], 10);
    const q = queries[0];
    for (const h of hits) {
      let s = 0;
      for (let j = 0; j < DIM; j++) s += v.matrix[h.row * DIM + j] * q[j];
      expect(h.score).toBeCloseTo(s, 12);
    }
    expect([...hits].sort((a, b) => b.score - a.score)).toEqual(hits);
  });

  test('when the int8 bound proves nothing (near-duplicate rows), the float32 scan decides, still exact', () => {
    const base = near();
    const dup = build(rows(40, 100, 1, () => unit(Float32Array.from(base, (x) => x + 1e-4 * gauss())), 'd'));
    const before = { ...dup.counts };
    const q = unit(Float32Array.from(base, (x) => x + 0.01 * gauss()));
    expect(dup.search(q, 50).map((h) => h.id)).toEqual(reference(dup, q, 50));
    expect(dup.counts.float32 - before.float32).toBe(1);
  });
});

describe('WorkspaceVectors: one file’s rows change in place', () => {
  test('remove a document, append another, re-folder by remove + append: same results as a matrix built fresh', () => {
    const all = rows(60, 50, 6, near, 'm');
    const v = new WorkspaceVectors(DIM, 10); // small capacity: appends grow it
    v.append(all);
    const gone = 'doc_m13';
    expect(v.remove({ documentId: gone })).toBe(50);
    expect(v.remove({ fileId: 'file_m40' })).toBe(50);
    const moved = all.filter((r) => r.document_id === 'doc_m21');
    v.remove({ documentId: 'doc_m21' });
    v.append(moved.map((r) => ({ ...r, folder_id: 'fld_new' })));
    // A far larger vector component than any before: the int8 copy is re-quantised, still exact.
    const spiky = new Float32Array(DIM);
    spiky[3] = 1;
    const extra = rows(1, 30, 1, () => unit(Float32Array.from(spiky, (x) => x + 0.05 * gauss())), 'x');
    v.append(extra);

    const expected = [...all.filter((r) => r.document_id !== gone && r.file_id !== 'file_m40' && r.document_id !== 'doc_m21'), ...moved.map((r) => ({ ...r, folder_id: 'fld_new' })), ...extra];
    const fresh = build(expected);
    expect(v.size).toBe(expected.length);
    expect(new Set(v.ids)).toEqual(new Set(expected.map((r) => r.id)));
    for (let i = 0; i < 15; i++) {
      const q = i % 3 === 2 ? unit(Float32Array.from(spiky, (x) => x + 0.1 * gauss())) : near();
      expect(v.search(q, 40).map((h) => h.id)).toEqual(fresh.search(q, 40).map((h) => h.id));
      expect(v.search(q, 40).map((h) => h.id)).toEqual(reference(v, q, 40));
      expect(v.search(q, 40, { folders: new Set(['fld_new']) }).map((h) => h.id)).toEqual(reference(fresh, q, 40, { folders: new Set(['fld_new']) }));
    }
    expect(v.search(near(), 100, { fileId: 'file_m13' })).toEqual([]);
  });
});
