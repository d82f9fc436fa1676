/**
 * Ironic's capabilities: `properties.capabilities` (and `instance_info.capabilities`) as a
 * string "k1:v1,k2:v2" or, in instance_info, an object.
 */
export function parseCapabilities(raw: unknown): Record<string, string> {
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
    return Object.fromEntries(Object.entries(raw as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  }
  const out: Record<string, string> = {};
  if (typeof raw !== 'string') return out;
  for (const part of raw.split(',')) {
    const i = part.indexOf(':');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

/** The capabilities string with `key` set to `value` unless it already has one. */
export function withCapability(raw: unknown, key: string, value: string): string {
  const caps = parseCapabilities(raw);
  if (!(key in caps)) caps[key] = value;
  return Object.entries(caps).map(([k, v]) => `${k}:${v}`).join(',');
}

/** Ironic's get_updated_capabilities: the capabilities string with `updates` set over what it has, in place. */
export function updatedCapabilities(raw: unknown, updates: Readonly<Record<string, string>>): string {
  const caps = { ...parseCapabilities(raw), ...updates };
  return Object.entries(caps).map(([k, v]) => `${k}:${v}`).join(',');
}

/**
 * Ironic's boot_mode_utils.get_boot_mode: the instance's `boot_mode` capability, else the
 * node's, else `uefi` (Ironic's `[deploy] default_boot_mode`).
 */
export function bootModeOf(node: { instanceInfo: Readonly<Record<string, unknown>>; properties: Readonly<Record<string, unknown>> }): string {
  return parseCapabilities(node.instanceInfo.capabilities).boot_mode ?? parseCapabilities(node.properties.capabilities).boot_mode ?? 'uefi';
}
