/**
 * A small parser for ironic.conf-style INI files. It knows nothing about
 * options: it only keeps line numbers so that the config loader can say
 * where a bad value came from.
 */

/** One `key = value` line, after the last-wins rule for duplicates. */
export interface IniEntry {
  section: string;
  key: string;
  value: string;
  line: number;
}

/** A `[section]` header; a section can be declared more than once. */
export interface IniSection {
  name: string;
  line: number;
}

/** A syntax error; `message` reads `file:line: what is wrong`. */
export interface IniProblem {
  line: number;
  message: string;
}

export interface IniResult {
  entries: IniEntry[];
  sections: IniSection[];
  problems: IniProblem[];
}

const HEADER = /^\[([^[\]]*)\]$/;

/**
 * Parses `text`; `file` only labels the problems. Values are trimmed and,
 * as oslo.config does, one pair of matching surrounding quotes is removed.
 * A key repeated in a section keeps its last value (oslo.config's rule).
 */
export function parseIni(text: string, file: string): IniResult {
  const sections: IniSection[] = [];
  const problems: IniProblem[] = [];
  const problem = (line: number, what: string): void => {
    problems.push({ line, message: `${file}:${line}: ${what}` });
  };
  // Keyed by section and key so that a later duplicate replaces the earlier one.
  const byKey = new Map<string, IniEntry>();
  // null after a malformed header: its keys are skipped, since the header
  // was already reported and guessing their section would mislead.
  let section: string | null | undefined;

  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  lines.forEach((raw, index) => {
    const line = index + 1;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith(';')) return;

    if (trimmed.startsWith('[')) {
      const m = HEADER.exec(trimmed);
      const name = m?.[1].trim() ?? '';
      if (name === '') {
        problem(line, `malformed section header ${JSON.stringify(trimmed)}`);
        section = null;
        return;
      }
      section = name;
      sections.push({ name, line });
      return;
    }

    const eq = trimmed.indexOf('=');
    if (eq < 0) {
      // The line itself is not echoed: it may be a mistyped secret.
      problem(line, 'line has no "=" (expected "option = value")');
      return;
    }
    const key = trimmed.slice(0, eq).trim();
    if (key === '') {
      problem(line, 'no option name before "="');
      return;
    }
    if (section === undefined) {
      problem(line, `option ${JSON.stringify(key)} is outside any [section]`);
      return;
    }
    if (section === null) return;
    const value = unquote(trimmed.slice(eq + 1).trim());
    const id = `${section}\0${key}`;
    byKey.delete(id);
    byKey.set(id, { section, key, value, line });
  });

  const entries = [...byKey.values()].sort((a, b) => a.line - b.line);
  return { entries, sections, problems };
}

function unquote(value: string): string {
  if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0]) {
    return value.slice(1, -1);
  }
  return value;
}
