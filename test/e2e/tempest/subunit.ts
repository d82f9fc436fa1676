/**
 * A reader of subunit v2 streams (what `tempest run --subunit` writes): per test id, its final
 * status and its attachments (traceback, captured log, skip reason). Packet layout, from the
 * subunit protocol: 0xB3, 16-bit flags (version 2 in the top nibble, status in the low three
 * bits), the packet's total length as a varint, then the optional fields the flags announce
 * (timestamp, test id, tags, MIME type, file content, route code), then a CRC32.
 */

const SIGNATURE = 0xb3;
const FLAG_TEST_ID = 0x0800;
const FLAG_ROUTE_CODE = 0x0400;
const FLAG_TIMESTAMP = 0x0200;
const FLAG_TAGS = 0x0080;
const FLAG_FILE_CONTENT = 0x0040;
const FLAG_MIME_TYPE = 0x0020;
const STATUSES = [undefined, 'exists', 'inprogress', 'success', 'uxsuccess', 'skip', 'fail', 'xfail'] as const;

export type TestStatus = NonNullable<(typeof STATUSES)[number]>;

export interface TestRecord {
  id: string;
  /** The last status reported (undefined when only attachments came). */
  status?: TestStatus;
  /** Attachments by name, chunks joined: e.g. `traceback`, `reason`, `pythonlogging:''`. */
  files: Map<string, string>;
}

/** Reads a varint at `pos`: the top two bits of the first byte say how many bytes follow. */
function varint(buf: Buffer, pos: number): [number, number] {
  const first = buf[pos];
  const extra = first >> 6;
  let value = first & 0x3f;
  for (let i = 1; i <= extra; i++) value = (value << 8) | buf[pos + i];
  return [value >>> 0, pos + 1 + extra];
}

function utf8(buf: Buffer, pos: number): [string, number] {
  const [len, at] = varint(buf, pos);
  return [buf.toString('utf8', at, at + len), at + len];
}

/** Parses a whole stream; bytes outside packets (stray output) are skipped. */
export function parseSubunit(stream: Buffer): Map<string, TestRecord> {
  const tests = new Map<string, TestRecord>();
  let pos = 0;
  while (pos < stream.length) {
    if (stream[pos] !== SIGNATURE || pos + 3 > stream.length) {
      pos++;
      continue;
    }
    const flags = stream.readUInt16BE(pos + 1);
    const [length, bodyStart] = varint(stream, pos + 3);
    const end = pos + length;
    if ((flags >> 12) !== 0x2 || length < 7 || end > stream.length) {
      pos++;
      continue;
    }
    let at = bodyStart;
    if (flags & FLAG_TIMESTAMP) at = varint(stream, at + 4)[1];
    let id: string | undefined;
    if (flags & FLAG_TEST_ID) [id, at] = utf8(stream, at);
    if (flags & FLAG_TAGS) {
      let count: number;
      [count, at] = varint(stream, at);
      for (let i = 0; i < count; i++) at = utf8(stream, at)[1];
    }
    if (flags & FLAG_MIME_TYPE) at = utf8(stream, at)[1];
    let file: { name: string; data: string } | undefined;
    if (flags & FLAG_FILE_CONTENT) {
      let name: string;
      let len: number;
      [name, at] = utf8(stream, at);
      [len, at] = varint(stream, at);
      file = { name, data: stream.toString('utf8', at, at + len) };
      at += len;
    }
    if (flags & FLAG_ROUTE_CODE) at = utf8(stream, at)[1];
    pos = end;
    if (id === undefined) continue;
    let rec = tests.get(id);
    if (!rec) tests.set(id, rec = { id, files: new Map() });
    const status = STATUSES[flags & 0x7];
    if (status) rec.status = status;
    if (file) rec.files.set(file.name, (rec.files.get(file.name) ?? '') + file.data);
  }
  return tests;
}
