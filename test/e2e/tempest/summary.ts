/**
 * What a tempest run came to, per test: passed, failed or skipped, with a one-line reason for
 * each failure (the exception, the last failing HTTP request tempest logged, the test line)
 * and skip. A class whose setUpClass failed or skipped reports no tests of its own: each
 * selected test of that class is counted with the class's outcome, so every run counts the
 * same tests. A failed tearDownClass (the class's cleanup) counts as one more failure.
 */
import type { TestRecord } from './subunit.js';

export type Outcome = 'passed' | 'failed' | 'skipped';

export interface TestResult {
  /** Without the `[id-…,attrs]` suffix. */
  id: string;
  outcome: Outcome;
  /** Why it failed or was skipped; empty when it passed. */
  reason: string;
}

export interface Summary {
  passed: number;
  failed: number;
  skipped: number;
  results: TestResult[];
  /** The per-module table, the failures and skips with their reasons, and the totals line. */
  text: string;
}

const CLASS_LEVEL = /^(setUpClass|tearDownClass) \((.+)\)$/;
const PREFIX = 'ironic_tempest_plugin.tests.api.admin.';
const REQUEST = /Request \(([^)]*)\): (\d{3}) ([A-Z]+) (\S+)/g;

const stripAttrs = (id: string): string => id.replace(/\[.*\]$/, '');
const classOf = (id: string): string => id.slice(0, id.lastIndexOf('.'));
/** `…admin.test_nodes.TestNodes.test_x` → `test_nodes`. */
const moduleOf = (id: string): string => {
  const m = CLASS_LEVEL.exec(id);
  const parts = (m ? `${m[2]}.x` : id).split('.');
  return parts.length >= 3 ? parts[parts.length - 3] : id;
};

function outcomeOf(status: TestRecord['status']): Outcome {
  if (status === 'success' || status === 'xfail') return 'passed';
  if (status === 'skip') return 'skipped';
  return 'failed';
}

/** The exception a traceback ends with, Ironic's faultstring pulled out of tempest's Details. */
function exceptionOf(traceback: string): string {
  const lines = traceback.trimEnd().split('\n');
  let lastFrame = -1;
  lines.forEach((l, i) => { if (l.trimStart().startsWith('File "')) lastFrame = i; });
  const exc = lines.slice(lastFrame + 2).map((l) => l.trim()).filter((l) => l && !/^[\^~]+$/.test(l)).join(' ') || lines.at(-1)!.trim();
  const short = exc.replace(/^(tempest\.lib\.exceptions\.|testtools\.matchers\._impl\.|builtins\.)/, '');
  const fault = /"faultstring":\s*"((?:[^"\\]|\\.)*)"/.exec(short);
  if (fault) return `${short.split(':')[0]}: ${fault[1].replace(/\\(['"\\])/g, '$1')}`;
  return short.length > 300 ? `${short.slice(0, 300)}…` : short;
}

/** One line: the exception, the last failing request (or the last request), the test line. */
function reasonOf(rec: TestRecord): string {
  const tb = rec.files.get('traceback') ?? '';
  if (!tb.trim()) return (rec.files.get('reason') ?? '').trim().split('\n')[0] || '(no traceback)';
  const parts = [exceptionOf(tb)];
  const requests = [...(rec.files.get("pythonlogging:''") ?? '').matchAll(REQUEST)]
    .filter((m) => !/:(_run_cleanups|tearDown|tearDownClass|resource_cleanup)$/.test(m[1]));
  const request = requests.filter((m) => Number(m[2]) >= 400).at(-1) ?? requests.at(-1);
  if (request) parts.push(`[${request[3]} ${request[4].replace(/^https?:\/\/[^/]+/, '')} -> ${request[2]}]`);
  const frames = [...tb.matchAll(/File "[^"]*\/(test_[^/"]+\.py)", line (\d+), in \S+\n\s*(.*)/g)];
  const frame = frames.at(-1);
  if (frame) parts.push(`@ ${frame[1]}:${frame[2]} ${frame[3].trim().slice(0, 80)}`);
  return parts.join(' ');
}

/**
 * Counts a run. `listed` is what `tempest run --list-tests` selected; without it, class-level
 * results count once each and a test that never ran cannot be noticed.
 */
export function summarize(records: Map<string, TestRecord>, listed: string[] = [], label = ''): Summary {
  const results = new Map<string, TestResult>();
  const classes = new Map<string, TestResult>();
  const teardowns: TestResult[] = [];
  for (const rec of records.values()) {
    // `exists` is the enumeration before the run; a test still in progress never ended.
    if (rec.status === undefined || rec.status === 'exists' || rec.status === 'inprogress') continue;
    const id = stripAttrs(rec.id);
    const outcome = outcomeOf(rec.status);
    const reason = outcome === 'passed' ? '' : outcome === 'skipped' ? (rec.files.get('reason') ?? reasonOf(rec)).trim().split('\n')[0] : reasonOf(rec);
    const m = CLASS_LEVEL.exec(id);
    if (m?.[1] === 'tearDownClass') {
      if (outcome === 'failed') teardowns.push({ id, outcome, reason });
    } else if (m) {
      classes.set(m[2], { id, outcome, reason });
    } else {
      results.set(id, { id, outcome, reason });
    }
  }
  for (const raw of listed) {
    const id = stripAttrs(raw.trim());
    if (!id || results.has(id)) continue;
    const cls = classes.get(classOf(id));
    results.set(id, cls
      ? { id, outcome: cls.outcome, reason: `(setUpClass of ${classOf(id).split('.').at(-1)}) ${cls.reason}` }
      : { id, outcome: 'failed', reason: 'never ran (not in the subunit stream)' });
  }
  // A class-level result no listed test stands for is counted on its own.
  for (const [cls, res] of classes) {
    if (![...results.keys()].some((id) => classOf(id) === cls)) results.set(res.id, res);
  }
  const all = [...results.values()].sort((a, b) => a.id.localeCompare(b.id));
  const count = (o: Outcome, rs: TestResult[]) => rs.filter((r) => r.outcome === o).length;
  const modules = [...new Set([...all, ...teardowns].map((r) => moduleOf(r.id)))].sort();
  const row = (name: string, p: number, f: number, s: number, t: number) =>
    `${name.padEnd(26)} ${String(p).padStart(7)} ${String(f).padStart(7)} ${String(s).padStart(8)} ${(t ? String(t) : '').padStart(9)}`;
  const lines = label ? [`== ${label}`] : [];
  lines.push(`${'module'.padEnd(26)} ${'passed'.padStart(7)} ${'failed'.padStart(7)} ${'skipped'.padStart(8)} ${'teardown'.padStart(9)}`);
  for (const mod of modules) {
    const rs = all.filter((r) => moduleOf(r.id) === mod);
    lines.push(row(mod, count('passed', rs), count('failed', rs), count('skipped', rs), teardowns.filter((r) => moduleOf(r.id) === mod).length));
  }
  const passed = count('passed', all);
  const failed = count('failed', all) + teardowns.length;
  const skipped = count('skipped', all);
  lines.push(row('TOTAL', passed, count('failed', all), skipped, teardowns.length));
  const failures = [...all.filter((r) => r.outcome === 'failed'), ...teardowns];
  if (failures.length) {
    lines.push('', `FAILED (${failures.length}, of which ${teardowns.length} class teardowns):`);
    for (const r of failures) lines.push(`${r.id.replace(PREFIX, '')}: ${r.reason}`);
  }
  const skips = all.filter((r) => r.outcome === 'skipped');
  if (skips.length) {
    lines.push('', `SKIPPED (${skips.length}):`);
    for (const r of skips) lines.push(`${r.id.replace(PREFIX, '')}: ${r.reason.slice(0, 160)}`);
  }
  lines.push('', `${passed} passed, ${failed} failed, ${skipped} skipped`);
  return { passed, failed, skipped, results: [...all, ...teardowns], text: lines.join('\n') };
}
