/**
 * Secret masking for driver_info / instance_info / driver_internal_info, as oslo's
 * mask_dict_password does: any key that looks like a credential shows `******`.
 */
const SECRET_PATTERNS = [/pass(word|wd|phrase)?($|_)/i, /password/i, /token/i, /secret/i, /_key$/i, /^key$/i, /configdrive/i, /keytab/i];

export const MASK = '******';

export function isSecretKey(key: string): boolean {
  return SECRET_PATTERNS.some((re) => re.test(key));
}

/** A copy with secrets masked, nested objects included. */
export function maskSecrets(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (isSecretKey(k) && v !== null && v !== undefined && v !== '') out[k] = MASK;
    else if (v && typeof v === 'object' && !Array.isArray(v)) out[k] = maskSecrets(v as Record<string, unknown>);
    else out[k] = v;
  }
  return out;
}
