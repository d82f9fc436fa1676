/**
 * The fake console's process: a stand-in for a serial line. Prints a banner, then a numbered
 * line every `interval` ms (0: none), and echoes whatever arrives on stdin as
 * "echo: <text>". Ends at stdin EOF, as a real console command does, unless told to ignore it
 * (and a reader gone from its output), as a hung one does.
 * Usage: node console-child.js <node uuid> <interval ms> [<line bytes> ignore-eof|eof]
 */
const [nodeUuid = 'unknown', intervalArg = '1000', padArg = '0', eofArg = 'eof'] = process.argv.slice(2);
const interval = Number(intervalArg);
const pad = Number(padArg);
const ignoreEof = eofArg === 'ignore-eof';

process.stdout.write(`Fake serial console of node ${nodeUuid}\r\n`);
let n = 0;
const line = (i: number) => {
  const text = `fake console ${nodeUuid} line ${i}`;
  return pad > text.length + 2 ? `${text}${'.'.repeat(pad - text.length - 2)}\r\n` : `${text}\r\n`;
};
const timer = interval > 0 ? setInterval(() => process.stdout.write(line(++n)), interval) : undefined;

process.stdin.on('data', (chunk: Buffer) => {
  process.stdout.write(`echo: ${chunk.toString('utf8')}\r\n`);
});
process.stdin.on('end', () => {
  if (ignoreEof) return;
  if (timer) clearInterval(timer);
  process.exit(0);
});
// A stdout whose reader is gone (the conductor died) ends the console too, unless it is hung.
process.stdout.on('error', () => {
  if (ignoreEof) {
    if (timer) clearInterval(timer);
    setInterval(() => undefined, 60_000);
    return;
  }
  process.exit(0);
});
