/**
 * Ironic's `.json` suffix before API 1.91 (middleware/json_ext.py): a path ending in `.json`
 * asked with an `X-OpenStack-Ironic-API-Version` below 1.91 is served without the suffix, and a
 * node looked up by that shortened name is looked up again with it when not found. From 1.91,
 * or without that header, `.json` is part of the name.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Knex } from 'knex';
import { NodeNotFound } from '../common/errors.js';
import { getNode, type Node } from '../db/nodes.js';

/** Set on a request whose path lost its `.json`; the client cannot send it (it is replaced). */
const STRIPPED = 'x-galvanic-json-suffix-stripped';

/** The path with `.json` removed when the request's version calls for it (the query is kept). */
export function stripJsonSuffix(req: IncomingMessage, url: string): string {
  delete req.headers[STRIPPED];
  const q = url.indexOf('?');
  const path = (q === -1 ? url : url.slice(0, q)).replace(/\/+$/, '');
  if (!path.endsWith('.json')) return url;
  const raw = req.headers['x-openstack-ironic-api-version'];
  const m = /^\s*1\.(\d+)\s*$/.exec(Array.isArray(raw) ? (raw[0] ?? '') : (raw ?? ''));
  const minor = m ? Number(m[1]) : 0;
  if (minor === 0 || minor >= 91) return url;
  req.headers[STRIPPED] = '1';
  return path.slice(0, -5) + (q === -1 ? '' : url.slice(q));
}

/** getNode, trying the name with `.json` again when the suffix was stripped (Ironic's _get_with_suffix). */
export async function getNodeWithSuffix(db: Knex, req: FastifyRequest, ident: string, opts?: { forUpdate?: boolean }): Promise<Node> {
  try {
    return await getNode(db, ident, opts);
  } catch (err) {
    if (!(err instanceof NodeNotFound) || req.headers[STRIPPED] !== '1') throw err;
    return getNode(db, `${ident}.json`, opts);
  }
}
