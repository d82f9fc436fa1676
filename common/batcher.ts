/** What a batch run says of one item: its value, or the error that item alone failed with. */
export type BatchOutcome<T> = { value: T } | { error: unknown };

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: the items submitted in one turn of the event loop, or while a batch runs, form
 * the next batch. Nothing waits for a batch to fill, so a lone item runs at the end of its turn
 * and batches grow only under load. The turn matters: work started together (the intents of
 * one claim) ends together, in one turn, and the first item alone used to make a transaction
 * of its own. One batch runs at a time; `run` answers for each item of the batch, in order, or
 * throws to fail them all.
 */
export class Batcher<I, O> {
  private queue: Array<Pending<I, O>> = [];
  private running = false;

  constructor(
    private readonly run: (items: I[]) => Promise<Array<BatchOutcome<O>>>,
    private readonly maxBatch: number,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const outcomes = await this.run(batch.map((p) => p.item));
          batch.forEach((p, i) => {
            const o = outcomes[i];
            if ('value' in o) p.resolve(o.value);
            else p.reject(o.error);
          });
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.running = false;
    }
  }
}
