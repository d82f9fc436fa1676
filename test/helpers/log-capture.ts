import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../common/logger.js';

/** A logger built as the processes build theirs, whose lines land parsed in `lines`. */
export function captureLog(debug = false): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ debug, destination }), lines };
}
