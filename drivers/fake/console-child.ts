/**
 * The fake console's process: a stand-in for a serial line. Prints a banner, then a numbered
 * line every `interval` ms (0: none), and echoes whatever arrives on stdin as
 * "echo: <text>". Ends at stdin EOF, as a real console command does.
 * Usage: node console-child.js <node uuid> <interval ms>
 */
const [nodeUuid = 'unknown', intervalArg = '1000'] = process.argv.slice(2);
const interval = Number(intervalArg);

process.stdout.write(`Fake serial console of node ${nodeUuid}\r\n`);
let n = 0;
const timer = interval > 0 ? setInterval(() => process.stdout.write(`fake console ${nodeUuid} line ${++n}\r\n`), interval) : undefined;

process.stdin.on('data', (chunk: Buffer) => {
  process.stdout.write(`echo: ${chunk.toString('utf8')}\r\n`);
});
process.stdin.on('end', () => {
  if (timer) clearInterval(timer);
  process.exit(0);
});
// A stdout whose reader is gone (the conductor died) ends the console too.
process.stdout.on('error', () => process.exit(0));
