/**
 * oslo's `strutils.bool_from_string(strict=True)`, which Ironic applies to boolean strings of
 * its API bodies and of options that take a boolean or a path (`[agent] verify_ca`).
 */
const TRUE = new Set(['1', 't', 'true', 'on', 'y', 'yes']);
const FALSE = new Set(['0', 'f', 'false', 'off', 'n', 'no']);

/** The boolean a string spells (case and surrounding white space aside), or undefined. */
export function boolFromString(value: string): boolean | undefined {
  const s = value.trim().toLowerCase();
  if (TRUE.has(s)) return true;
  if (FALSE.has(s)) return false;
  return undefined;
}
