/**
 * Natural batching (group commit): an item submitted while `concurrency` flushes are in flight waits for one of them
 * to end and goes with every other item that arrived meanwhile, up to `maxBatch`; an idle batcher flushes at once, so
 * a lone item waits for nothing. Under load the batches grow by themselves and the work per item shrinks.
 *
 * `flush` answers one result per item, in order: a value, or an Error that rejects that item's promise alone. A
 * `flush` that throws rejects every item of its batch.
 */
export class Batcher<I, R> {
  private queue: Array<{ item: I; resolve: (r: R) => void; reject: (e: Error) => void }> = [];
  private inFlight = 0;

  constructor(
    private readonly flush: (items: I[]) => Promise<Array<R | Error>>,
    private readonly opts: { maxBatch: number; concurrency: number },
  ) {
    if (opts.maxBatch < 1 || opts.concurrency < 1) throw new Error('Batcher: maxBatch and concurrency must be 1 or more');
  }

  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.next();
    });
  }

  /** Items waiting for a flush (not those in flight). */
  get waiting(): number {
    return this.queue.length;
  }

  private next(): void {
    while (this.inFlight < this.opts.concurrency && this.queue.length) {
      const batch = this.queue.splice(0, this.opts.maxBatch);
      this.inFlight++;
      void this.run(batch);
    }
  }

  private async run(batch: Array<{ item: I; resolve: (r: R) => void; reject: (e: Error) => void }>): Promise<void> {
    try {
      const results = await this.flush(batch.map((b) => b.item));
      if (results.length !== batch.length) throw new Error(`Batcher: flush answered ${results.length} results for ${batch.length} items`);
      batch.forEach((b, i) => {
        const r = results[i];
        if (r instanceof Error) b.reject(r);
        else b.resolve(r);
      });
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      for (const b of batch) b.reject(e);
    } finally {
      this.inFlight--;
      this.next();
    }
  }
}
