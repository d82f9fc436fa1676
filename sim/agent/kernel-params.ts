/**
 * What an agent reads from its kernel command line, as IPA does: `ipa-api-url` (lookup and
 * heartbeats) and `ipa-inspection-callback-url` (where its inventory goes; without one, IPA
 * with an API URL posts it to `<api>/v1/continue_inspection`, and without either it does nothing).
 */
import type { AgentUrls } from './agent.js';

/** `key=value` words (a bare word maps to ''), the last of a key winning. */
export function kernelParams(cmdline: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const word of cmdline.split(/\s+/).filter(Boolean)) {
    const i = word.indexOf('=');
    out.set(i < 0 ? word : word.slice(0, i), i < 0 ? '' : word.slice(i + 1));
  }
  return out;
}

/** Where an agent booted with these parameters calls. */
export function agentUrls(params: ReadonlyMap<string, string>): AgentUrls {
  const api = params.get('ipa-api-url')?.replace(/\/+$/, '') || null;
  const callback = params.get('ipa-inspection-callback-url') || null;
  return { apiUrl: api, inspectionUrl: callback ?? (api ? `${api}/v1/continue_inspection` : null) };
}
