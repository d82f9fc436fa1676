import fs from 'node:fs/promises';

/**
 * Follows a file of JSON lines as `tail -F` does: starts at its end, hands over each complete
 * line as it is appended, and starts again from the top when the file is replaced or truncated
 * (log rotation). Polling rather than fs.watch: watch events are lost on some file systems and
 * across renames, and a notification file grows at most a few times a second per conductor.
 */
export class LogFollower {
  private offset = -1;
  private inode = -1;
  private partial = '';
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly file: string,
    private readonly onLine: (line: string) => void,
    private readonly pollMs = 250,
  ) {}

  /** Starts at the current end of the file (or its beginning, once it appears). */
  async start(): Promise<void> {
    const st = await fs.stat(this.file).catch(() => undefined);
    if (st) {
      this.offset = st.size;
      this.inode = st.ino;
    }
    this.timer = setInterval(() => {
      this.reading ??= this.poll().finally(() => {
        this.reading = undefined;
      });
    }, this.pollMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.reading;
  }

  private async poll(): Promise<void> {
    const st = await fs.stat(this.file).catch(() => undefined);
    if (!st) return;
    if (st.ino !== this.inode || st.size < this.offset || this.offset < 0) {
      // A new file (rotated, recreated, or appearing for the first time): read it whole.
      this.inode = st.ino;
      this.offset = 0;
      this.partial = '';
    }
    if (st.size === this.offset) return;
    const fh = await fs.open(this.file, 'r');
    try {
      const length = st.size - this.offset;
      const buf = Buffer.alloc(length);
      const { bytesRead } = await fh.read(buf, 0, length, this.offset);
      this.offset += bytesRead;
      const text = this.partial + buf.subarray(0, bytesRead).toString('utf8');
      const lines = text.split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) if (line.trim() !== '') this.onLine(line);
    } finally {
      await fh.close();
    }
  }
}
