/** The last `capacity` bytes written, for replay to a viewer that connects later. */
export class RingBuffer {
  private readonly buf: Buffer;
  private start = 0;
  private length = 0;

  constructor(readonly capacity: number) {
    this.buf = Buffer.alloc(capacity);
  }

  push(data: Buffer): void {
    if (data.length >= this.capacity) {
      data.copy(this.buf, 0, data.length - this.capacity);
      this.start = 0;
      this.length = this.capacity;
      return;
    }
    const end = (this.start + this.length) % this.capacity;
    const first = Math.min(data.length, this.capacity - end);
    data.copy(this.buf, end, 0, first);
    data.copy(this.buf, 0, first);
    const overflow = this.length + data.length - this.capacity;
    if (overflow > 0) {
      this.start = (this.start + overflow) % this.capacity;
      this.length = this.capacity;
    } else {
      this.length += data.length;
    }
  }

  /** A copy of what is held, oldest byte first. */
  contents(): Buffer {
    const tail = Math.min(this.length, this.capacity - this.start);
    return Buffer.concat([this.buf.subarray(this.start, this.start + tail), this.buf.subarray(0, this.length - tail)]);
  }
}
