/**
 * What an agent reads from its kernel command line, as IPA does: `ipa-api-url` (lookup and
 * heartbeats) and `ipa-inspection-callback-url` (where its inventory goes). IPA inspects only
 * when told where (inspector.inspect): with the callback URL, or (IPA 10 and later) with
 * `ipa-inspection-collectors` and an API URL, to `<api>/v1/continue_inspection`; an agent booted
 * with only `ipa-api-url` (a deploy or a cleaning) posts no inventory.
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
  const collectors = params.get('ipa-inspection-collectors');
  return { apiUrl: api, inspectionUrl: callback ?? (api && collectors ? `${api}/v1/continue_inspection` : null) };
}
