import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * The ports to pick from: below the kernel's ephemeral range where it can be read (Linux).
 * A port the kernel handed out for port 0 lies in that range, and any outgoing connection
 * (a pool connecting to Postgres) could take it as its local port before the caller listened:
 * a benchmark's API then failed with EADDRINUSE.
 */
function candidateRange(): { lo: number; hi: number } | undefined {
  try {
    const [ephemeralLo] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(ephemeralLo) && ephemeralLo > 11_000) return { lo: 10_000, hi: ephemeralLo - 1 };
  } catch {
    // Not Linux: the kernel's choice.
  }
  return undefined;
}

const RANGE = candidateRange();

function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' && port !== 0 ? resolve(undefined) : reject(err)));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range where possible. */
export async function freePort(): Promise<number> {
  if (RANGE) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = await tryListen(RANGE.lo + Math.floor(Math.random() * (RANGE.hi - RANGE.lo + 1)));
      if (port !== undefined) return port;
    }
  }
  return (await tryListen(0)) as number;
}
