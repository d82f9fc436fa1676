/** A counting semaphore whose waiters can give up through an AbortSignal. */
export class Semaphore {
  private active = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(readonly limit: number) {}

  /** Requests in flight; for logs and tests. */
  get inUse(): number {
    return this.active;
  }

  /**
   * Waits for a slot. The returned function frees it (calling it twice is harmless).
   * @throws the signal's reason when it aborts first
   */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(this.releaser());
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      this.next();
    };
  }

  private next(): void {
    while (this.active < this.limit && this.waiters.length > 0) {
      const grant = this.waiters.shift();
      if (!grant) break;
      this.active++;
      grant();
    }
  }
}
