/**
 * A client of QEMU's machine protocol (QMP) over a unix socket: JSON objects, one per line;
 * commands carry an id and are answered with `return` or `error`, and asynchronous `event`s
 * come in between.
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';

/** A command QEMU refused: its error class and description. */
export class QmpError extends Error {
  constructor(
    readonly command: string,
    readonly errorClass: string,
    desc: string,
  ) {
    super(`QMP ${command}: ${desc}`);
    this.name = 'QmpError';
  }
}

interface Pending {
  command: string;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Qmp extends EventEmitter<{ event: [name: string, data: unknown]; close: [] }> {
  private buffer = '';
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private greeted: Promise<void>;
  private closed = false;

  private constructor(private readonly socket: net.Socket) {
    super();
    let greet!: () => void;
    this.greeted = new Promise((resolve) => (greet = resolve));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      let nl: number;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        const line = this.buffer.slice(0, nl).trim();
        this.buffer = this.buffer.slice(nl + 1);
        if (line) this.message(line, greet);
      }
    });
    const gone = () => {
      if (this.closed) return;
      this.closed = true;
      for (const p of this.pending.values()) p.reject(new Error(`QMP ${p.command}: the connection to QEMU closed`));
      this.pending.clear();
      this.emit('close');
    };
    socket.on('close', gone);
    socket.on('error', gone);
  }

  /**
   * Connects to QEMU's QMP socket, retrying while QEMU has not made it yet, and leaves the
   * capabilities negotiation done.
   */
  static async connect(socketPath: string, timeoutMs: number): Promise<Qmp> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const socket = await new Promise<net.Socket>((resolve, reject) => {
          const s = net.connect(socketPath);
          s.once('connect', () => {
            s.off('error', reject);
            resolve(s);
          });
          s.once('error', reject);
        });
        const qmp = new Qmp(socket);
        await qmp.greeted;
        await qmp.execute('qmp_capabilities');
        return qmp;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`QMP socket ${socketPath}: ${(err as Error).message}`);
        await sleep(50);
      }
    }
  }

  private message(line: string, greet: () => void): void {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if ('QMP' in msg) return greet();
    if (typeof msg.event === 'string') {
      this.emit('event', msg.event, msg.data);
      return;
    }
    const id = typeof msg.id === 'number' ? msg.id : NaN;
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if ('error' in msg) {
      const e = msg.error as { class?: string; desc?: string };
      p.reject(new QmpError(p.command, e.class ?? 'GenericError', e.desc ?? 'failed'));
    } else {
      p.resolve(msg.return);
    }
  }

  /** Runs a command; resolves with its `return`. @throws QmpError when QEMU refuses it */
  execute<T = unknown>(command: string, args?: Record<string, unknown>): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`QMP ${command}: the connection to QEMU is closed`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { command, resolve: resolve as (v: unknown) => void, reject });
      this.socket.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id })}\n`);
    });
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  close(): void {
    this.socket.destroy();
  }
}
