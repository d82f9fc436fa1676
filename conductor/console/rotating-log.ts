import { closeSync, fstatSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';

/**
 * An append-only file that never grows past `maxBytes`: when a write would, the file becomes
 * `<path>.1` (older ones shift up to `<path>.<backups>`, the oldest is deleted) and a new one
 * starts. Writes are synchronous: console output is slow and a log must not reorder.
 */
export class RotatingLog {
  private fd: number;
  private size: number;

  constructor(private readonly path: string, private readonly maxBytes: number, private readonly backups: number) {
    this.fd = openSync(path, 'a', 0o600);
    this.size = fstatSync(this.fd).size;
  }

  write(data: Buffer): void {
    let rest = data;
    while (rest.length > 0) {
      if (this.size >= this.maxBytes) this.rotate();
      const room = this.maxBytes - this.size;
      const part = rest.subarray(0, room);
      writeSync(this.fd, part);
      this.size += part.length;
      rest = rest.subarray(part.length);
    }
  }

  close(): void {
    closeSync(this.fd);
  }

  private rotate(): void {
    closeSync(this.fd);
    rmSync(`${this.path}.${this.backups}`, { force: true });
    for (let i = this.backups - 1; i >= 1; i--) {
      try {
        renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
      } catch {
        // not there yet
      }
    }
    if (this.backups > 0) renameSync(this.path, `${this.path}.1`);
    else rmSync(this.path, { force: true });
    this.fd = openSync(this.path, 'a', 0o600);
    this.size = 0;
  }
}
