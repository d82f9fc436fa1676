import { InvalidParameterValue } from '../common/errors.js';

/** Query strings as fastify gives them. */
export type Query = Record<string, string | string[] | undefined>;

/** A single-valued query parameter; repeating it is an error, not a silent pick. */
export function param(q: Query, name: string): string | undefined {
  const v = q[name];
  if (Array.isArray(v)) throw new InvalidParameterValue(`Query parameter ${name} was given more than once.`);
  return v;
}

export function boolParam(q: Query, name: string): boolean | undefined {
  const v = param(q, name);
  if (v === undefined) return undefined;
  const s = v.toLowerCase();
  if (['true', '1', 'yes', 'on', 't', 'y'].includes(s)) return true;
  if (['false', '0', 'no', 'off', 'f', 'n'].includes(s)) return false;
  throw new InvalidParameterValue(`Invalid value for ${name}: "${v}". Expected a boolean.`);
}

/** `limit`: absent → max_limit; ≤0 or not an integer → 400; above max → max (Ironic caps). */
export function limitParam(q: Query, maxLimit: number): number {
  const v = param(q, 'limit');
  if (v === undefined) return maxLimit;
  if (!/^-?\d+$/.test(v)) throw new InvalidParameterValue(`Invalid value for limit: "${v}". Expected an integer.`);
  const n = Number(v);
  if (n <= 0) throw new InvalidParameterValue(`Limit must be positive: ${v}`);
  return Math.min(n, maxLimit);
}

export function sortParams(q: Query, allowed: ReadonlySet<string>, resource: string): { sortKey: string; sortDir: 'asc' | 'desc' } {
  const sortKey = param(q, 'sort_key') ?? 'id';
  const sortDir = (param(q, 'sort_dir') ?? 'asc').toLowerCase();
  if (sortDir !== 'asc' && sortDir !== 'desc') {
    throw new InvalidParameterValue(`Invalid sort direction: ${sortDir}. Acceptable values are 'asc' or 'desc'`);
  }
  if (!allowed.has(sortKey)) {
    throw new InvalidParameterValue(`The sort_key value "${sortKey}" is an invalid field for sorting ${resource}.`);
  }
  return { sortKey, sortDir };
}

/** Builds the `next` link: present only when a full page came back. */
export function nextLink(base: string, path: string, q: Query, count: number, limit: number, lastUuid: string | undefined): string | undefined {
  if (count < limit || !lastUuid) return undefined;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (k === 'marker' || k === 'limit' || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) params.append(k, one);
  }
  params.set('limit', String(limit));
  params.set('marker', lastUuid);
  return `${base}/v1/${path}?${params.toString()}`;
}

export interface ListPageOptions<T extends { uuid: string }> {
  /** The collection's name in the path and the body, e.g. `deploy_templates`. */
  collection: string;
  /** Whether the request came by `…/detail`, which the next link keeps. */
  detailPath: boolean;
  maxLimit: number;
  sortKeys: ReadonlySet<string>;
  /** Sort keys Ironic refuses with its short message (the JSON fields), before the others. */
  refusedSortKeys: readonly string[];
  /** The resource as the long refusal of a sort key names it. */
  sortResource: string;
  /** The row the `marker` names. */
  marker(ident: string): Promise<T>;
  list(page: { limit: number; marker?: T; sortKey: string; sortDir: 'asc' | 'desc' }): Promise<T[]>;
  view(row: T): Record<string, unknown>;
}

/**
 * A list response: the page that `limit`, `sort_key`, `sort_dir` and `marker` ask for, each row
 * through `view`, and the `next` link when the page is full.
 */
export async function listPageResponse<T extends { uuid: string }>(q: Query, base: string, opts: ListPageOptions<T>): Promise<Record<string, unknown>> {
  const limit = limitParam(q, opts.maxLimit);
  const sortKey = param(q, 'sort_key');
  if (sortKey !== undefined && opts.refusedSortKeys.includes(sortKey)) {
    throw new InvalidParameterValue(`The sort_key value ${sortKey} is an invalid field for sorting`);
  }
  const sort = sortParams(q, opts.sortKeys, opts.sortResource);
  const markerIdent = param(q, 'marker');
  const marker = markerIdent !== undefined ? await opts.marker(markerIdent) : undefined;
  const rows = await opts.list({ limit, marker, ...sort });
  const out: Record<string, unknown> = { [opts.collection]: rows.map((r) => opts.view(r)) };
  const next = nextLink(base, opts.detailPath ? `${opts.collection}/detail` : opts.collection, q, rows.length, limit, rows.at(-1)?.uuid);
  if (next) out.next = next;
  return out;
}
