import { Batcher } from '../../lib/batcher';

/** A flush that holds until released, recording each batch it was given. */
function heldFlush() {
  const batches: number[][] = [];
  const releases: Array<() => void> = [];
  const flush = (items: number[]) => {
    batches.push(items);
    return new Promise<Array<number | Error>>((resolve) => releases.push(() => resolve(items.map((i) => (i < 0 ? new Error(`bad ${i}`) : i * 10)))));
  };
  return { batches, releases, flush };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('Batcher (natural batching: what arrives during a flush goes together in the next)', () => {
  it('flushes a lone item at once, and gathers the items that arrive while the flushes run into the next batch, up to maxBatch', async () => {
    const f = heldFlush();
    const b = new Batcher(f.flush, { maxBatch: 3, concurrency: 1 });
    const first = b.submit(1);
    expect(f.batches).toEqual([[1]]);
    const rest = [2, 3, 4, 5, 6].map((i) => b.submit(i));
    expect(b.waiting).toBe(5);
    f.releases[0]();
    expect(await first).toBe(10);
    await tick();
    expect(f.batches).toEqual([[1], [2, 3, 4]]);
    f.releases[1]();
    await tick();
    expect(f.batches).toEqual([[1], [2, 3, 4], [5, 6]]);
    f.releases[2]();
    expect(await Promise.all(rest)).toEqual([20, 30, 40, 50, 60]);
    expect(b.waiting).toBe(0);
  });

  it('runs up to `concurrency` flushes at once', async () => {
    const f = heldFlush();
    const b = new Batcher(f.flush, { maxBatch: 10, concurrency: 2 });
    const all = [1, 2, 3, 4].map((i) => b.submit(i));
    expect(f.batches).toEqual([[1], [2]]);
    f.releases[1]();
    await tick();
    expect(f.batches).toEqual([[1], [2], [3, 4]]);
    f.releases[0]();
    f.releases[2]();
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40]);
  });

  it('rejects only the item whose result is an Error, and every item of a batch whose flush throws; it goes on after both', async () => {
    const f = heldFlush();
    const b = new Batcher(f.flush, { maxBatch: 10, concurrency: 1 });
    const head = b.submit(0);
    const good = b.submit(1);
    const bad = b.submit(-1);
    f.releases[0]();
    await head;
    await tick();
    f.releases[1]();
    expect(await good).toBe(10);
    await expect(bad).rejects.toThrow('bad -1');

    let calls = 0;
    const throwing = new Batcher<number, number>(async (items) => {
      if (calls++ === 0) throw new Error('database gone');
      return items.map((i) => i);
    }, { maxBatch: 10, concurrency: 1 });
    const [x, y] = [throwing.submit(1), throwing.submit(2)];
    await expect(x).rejects.toThrow('database gone');
    expect(await y).toBe(2);
    expect(await throwing.submit(3)).toBe(3);
  });
});
