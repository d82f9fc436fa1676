/**
 * The part of Jinja2 that boot configuration templates use (Ironic's ipxe_config.template,
 * pxe_config.template, pxe_grub_config.template and boot.ipxe): `{{ a.b }}` with the
 * `default(value, true)` filter, `{% if %}` / `{% elif %}` / `{% else %}` / `{% endif %}` over a
 * name, `not`, or a comparison with a number or string, `{# comments #}`, and `-` to trim the
 * whitespace beside a tag. Rendered as Jinja2's defaults render (an undefined name is empty,
 * the last newline is dropped), so an operator's template in this subset gives what Ironic's
 * would. Anything else (`for`, `set`, macros, other filters) is refused when the template is
 * read, not when a node boots.
 */
import { InvalidParameterValue } from '../../common/errors.js';

export type TemplateValues = Readonly<Record<string, unknown>>;

type Operand = { path: string[] } | { literal: string | number | boolean | null };
type Condition = { not: boolean; left: Operand; op?: string; right?: Operand };
type Expr = { value: Operand; defaults: Array<{ value: Operand; boolean: boolean }> };
type Node =
  | { kind: 'text'; text: string }
  | { kind: 'expr'; expr: Expr }
  | { kind: 'if'; branches: Array<{ cond: Condition; body: Node[] }>; otherwise: Node[] };

const TAG = /\{\{(-?)([\s\S]*?)(-?)\}\}|\{%(-?)([\s\S]*?)(-?)%\}|\{#(-?)[\s\S]*?(-?)#\}/g;
const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

function fail(name: string, why: string): never {
  throw new InvalidParameterValue(`Template ${name}: ${why}`);
}

function operand(name: string, src: string): Operand {
  const s = src.trim();
  if (/^-?\d+(\.\d+)?$/.test(s)) return { literal: Number(s) };
  const q = /^(["'])(.*)\1$/.exec(s);
  if (q) return { literal: q[2] };
  if (s === 'true' || s === 'True') return { literal: true };
  if (s === 'false' || s === 'False') return { literal: false };
  if (s === 'none' || s === 'None') return { literal: null };
  if (!PATH.test(s)) fail(name, `"${s}" is not a name, number or string (supported: names, literals, |default, if/elif/else/endif)`);
  return { path: s.split('.') };
}

function expression(name: string, src: string): Expr {
  const [head, ...filters] = src.split('|');
  const defaults = filters.map((f) => {
    const m = /^\s*default\s*\(\s*("[^"]*"|'[^']*'|[^,()]+?)\s*(?:,\s*(true|false|True|False)\s*)?\)\s*$/.exec(f);
    if (!m) fail(name, `filter "${f.trim()}" is not supported (only default(value[, true]))`);
    return { value: operand(name, m[1]), boolean: m[2] === 'true' || m[2] === 'True' };
  });
  return { value: operand(name, head), defaults };
}

function condition(name: string, src: string): Condition {
  let s = src.trim();
  let not = false;
  if (/^not\s/.test(s)) {
    not = true;
    s = s.slice(4);
  }
  const m = /^(.+?)\s*(==|!=|>=|<=|>|<)\s*(.+)$/.exec(s);
  if (!m) return { not, left: operand(name, s) };
  return { not, left: operand(name, m[1]), op: m[2], right: operand(name, m[3]) };
}

/** Parses a template, refusing what the subset lacks. @throws InvalidParameterValue */
export function parseTemplate(name: string, source: string): Node[] {
  // Tokens: text between tags, with `-` trims applied to it.
  const tokens: Array<{ text: string } | { tag: 'expr' | 'stmt'; body: string }> = [];
  let last = 0;
  let trimNext = false;
  for (const m of source.matchAll(TAG)) {
    let text = source.slice(last, m.index);
    if (trimNext) text = text.replace(/^\s+/, '');
    const trimBefore = (m[1] ?? m[4] ?? m[7]) === '-';
    if (trimBefore) text = text.replace(/\s+$/, '');
    if (text) tokens.push({ text });
    trimNext = (m[3] ?? m[6] ?? m[8]) === '-';
    if (m[2] !== undefined) tokens.push({ tag: 'expr', body: m[2] });
    else if (m[5] !== undefined) tokens.push({ tag: 'stmt', body: m[5] });
    last = m.index + m[0].length;
  }
  let tail = source.slice(last);
  if (trimNext) tail = tail.replace(/^\s+/, '');
  if (tail) tokens.push({ text: tail });

  // A stack of open `if`s; the innermost body is where nodes go.
  const root: Node[] = [];
  const open: Array<{ node: Extract<Node, { kind: 'if' }>; inElse: boolean }> = [];
  const body = (): Node[] => {
    const top = open[open.length - 1];
    if (!top) return root;
    return top.inElse ? top.node.otherwise : top.node.branches[top.node.branches.length - 1].body;
  };
  for (const t of tokens) {
    if ('text' in t) {
      body().push({ kind: 'text', text: t.text });
    } else if (t.tag === 'expr') {
      body().push({ kind: 'expr', expr: expression(name, t.body) });
    } else {
      const [, word, rest] = /^\s*(\w+)\s*([\s\S]*?)\s*$/.exec(t.body) ?? [];
      const top = open[open.length - 1];
      if (word === 'if') {
        const node: Extract<Node, { kind: 'if' }> = { kind: 'if', branches: [{ cond: condition(name, rest), body: [] }], otherwise: [] };
        body().push(node);
        open.push({ node, inElse: false });
      } else if (word === 'elif' && top && !top.inElse) {
        top.node.branches.push({ cond: condition(name, rest), body: [] });
      } else if (word === 'else' && top && !top.inElse && !rest) {
        top.inElse = true;
      } else if (word === 'endif' && top && !rest) {
        open.pop();
      } else {
        fail(name, `"{%${t.body}%}" is not supported here (supported: if, elif, else, endif)`);
      }
    }
  }
  if (open.length) fail(name, 'an if has no endif');
  return root;
}

function lookup(values: TemplateValues, path: readonly string[]): unknown {
  let v: unknown = values;
  for (const key of path) {
    if (typeof v !== 'object' || v === null || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

function valueOf(values: TemplateValues, o: Operand): unknown {
  return 'path' in o ? lookup(values, o.path) : o.literal;
}

/** Python's truthiness for the values templates get. */
function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object' && v !== null) return Object.keys(v).length > 0;
  return Boolean(v);
}

function compare(a: unknown, op: string, b: unknown): boolean {
  if (op === '==') return a === b;
  if (op === '!=') return a !== b;
  // Python refuses to order an undefined against a number; Jinja's Undefined does too, so a
  // template that compares a missing value is broken either way: false keeps the boot going.
  if (typeof a !== typeof b || (typeof a !== 'number' && typeof a !== 'string')) return false;
  const x = a as number | string;
  const y = b as number | string;
  return op === '>' ? x > y : op === '<' ? x < y : op === '>=' ? x >= y : x <= y;
}

function show(v: unknown): string {
  if (v === undefined) return '';
  if (v === null) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  return String(v);
}

function renderNodes(nodes: readonly Node[], values: TemplateValues): string {
  let out = '';
  for (const n of nodes) {
    if (n.kind === 'text') {
      out += n.text;
    } else if (n.kind === 'expr') {
      let v = valueOf(values, n.expr.value);
      for (const d of n.expr.defaults) if (d.boolean ? !truthy(v) : v === undefined) v = valueOf(values, d.value);
      out += show(v);
    } else {
      const branch = n.branches.find((b) => {
        const left = valueOf(values, b.cond.left);
        const holds = b.cond.op ? compare(left, b.cond.op, valueOf(values, b.cond.right!)) : truthy(left);
        return holds !== b.cond.not;
      });
      out += renderNodes(branch ? branch.body : n.otherwise, values);
    }
  }
  return out;
}

/** A parsed template. */
export class Template {
  private readonly nodes: Node[];

  /** @throws InvalidParameterValue for syntax outside the subset */
  constructor(readonly name: string, source: string) {
    this.nodes = parseTemplate(name, source);
  }

  /** Renders as Jinja2 does with its defaults: the template's last newline is dropped. */
  render(values: TemplateValues): string {
    return renderNodes(this.nodes, values).replace(/\n$/, '');
  }
}
