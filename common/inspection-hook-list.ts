/**
 * The inspection hooks Galvanic has and the order they need, as Ironic checks
 * `[inspector] hooks` when the agent inspect interface loads. The config schema refuses a
 * list that breaks these rules (with the file and line that set it); the hooks themselves
 * are drivers/inspection-hooks.ts.
 */

/** Hooks available, each with the hooks that must run before it (Ironic's `dependencies`). */
const HOOKS: Readonly<Record<string, readonly string[]>> = {
  'ramdisk-error': [],
  'validate-interfaces': [],
  ports: ['validate-interfaces'],
  architecture: [],
  memory: [],
  cpus: [],
  'boot-mode': [],
  'root-device': [],
};

/** `[inspector] hooks` as a list of names, with `$default_hooks` expanded. */
export function expandHooks(hooks: string, defaultHooks: string): string[] {
  return hooks.replace(/\$\{?default_hooks\}?/g, defaultHooks).split(',').map((s) => s.trim()).filter(Boolean);
}

/**
 * What is wrong with a list of hooks, in Ironic's words: a hook that does not exist, or one
 * before a hook it depends on. Undefined when the list is fine.
 */
export function hooksProblem(names: readonly string[]): string | undefined {
  const missing = names.filter((n) => !Object.hasOwn(HOOKS, n));
  if (missing.length) return `The following hook(s) are missing or failed to load: ${missing.join(', ')}`;
  const seen = new Set<string>();
  const errors: string[] = [];
  for (const name of names) {
    const lacking = HOOKS[name].filter((d) => !seen.has(d));
    if (lacking.length) errors.push(`Hook ${name} requires these missing hooks to be enabled before it: ${lacking.join(', ')}`);
    else seen.add(name);
  }
  if (errors.length) return `Some hooks failed to load due to dependency problems: ${errors.join(', ')}`;
  return undefined;
}
