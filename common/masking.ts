/**
 * Secret masking for driver_info / instance_info / driver_internal_info and step arguments, as
 * oslo's mask_dict_password does, for the API and for what the conductor hands the agent: any
 * key that looks like a credential shows `******`, in nested objects and lists too, and so does
 * a credential written inside a string (`password=…`, `"token": "…"`, `--password …`), such as
 * the signature token of a pre-signed image URL.
 */
const SECRET_PATTERNS = [
  /pass(word|wd|phrase)?($|_)/i, /password/i, /pswd/i, /token/i, /secret/i, /_key$/i, /^key$/i, /(private|encrypted)_key/i, /(ssl|fernet)key/i,
  /configdrive/i, /keytab/i,
];

export const MASK = '******';

export function isSecretKey(key: string): boolean {
  return SECRET_PATTERNS.some((re) => re.test(key));
}

/** A cheap test that a string may name a credential at all, before the patterns below run. */
const MAY_NAME_SECRET = /pass|pswd|token|secret|key|configdrive/i;
/**
 * `name=value`, `name: value`, `"name": "value"`, `'the name': 'value'`, `name='value'`; the
 * value is a lookahead, so that a name that is no credential does not swallow the next one
 * (`?X-Amz-Credential=…&X-Amz-Security-Token=…`).
 */
const ASSIGNED = /(?:(["'])([^"'\n]+)\1|([\w.-]+))\s*[=:]\s*(?=("[^"]*"|'[^']*'|[^\s"']+))/g;
/** A command-line option and its value: `--password value`. */
const OPTION = /(--)([\w.-]+)(\s+)([^\s"'=-][^\s"']*)/g;

/** A string with the values of the credentials it names masked (oslo's mask_password). */
export function maskText(text: string): string {
  if (!MAY_NAME_SECRET.test(text)) return text;
  let out = '';
  let from = 0;
  for (const m of text.matchAll(ASSIGNED)) {
    const name = m[2] ?? m[3] ?? '';
    const valueAt = m.index + m[0].length;
    if (m.index < from || !isSecretKey(name)) continue;
    const value = m[4];
    const quote = value[0] === '"' || value[0] === "'" ? value[0] : '';
    out += `${text.slice(from, valueAt)}${quote}${MASK}${quote}`;
    from = valueAt + value.length;
  }
  out += text.slice(from);
  return out.replace(OPTION, (all, dashes: string, name: string, gap: string) => (isSecretKey(name) ? `${dashes}${name}${gap}${MASK}` : all));
}

function maskValue(v: unknown): unknown {
  if (typeof v === 'string') return maskText(v);
  if (Array.isArray(v)) return v.map(maskValue);
  if (v && typeof v === 'object') return maskSecrets(v as Record<string, unknown>);
  return v;
}

/** A copy with secrets masked, nested objects and lists included. */
export function maskSecrets(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (isSecretKey(k) && v !== null && v !== undefined && v !== '') out[k] = MASK;
    else out[k] = maskValue(v);
  }
  return out;
}
