/**
 * Helpers for the provisioning tests: drive a node through the API (fastify inject or real
 * HTTP), wait until its transition ends, and read what the Redfish simulator saw.
 */
import { expect } from 'chai';
import type { FastifyInstance } from 'fastify';
import { until } from './until.js';

/** The node fields the provisioning tests read. */
export interface NodeView {
  uuid: string;
  name: string | null;
  provision_state: string;
  target_provision_state: string | null;
  power_state: string | null;
  last_error: string | null;
  reservation: string | null;
  maintenance: boolean;
  properties: Record<string, unknown>;
  instance_info: Record<string, unknown>;
  instance_uuid: string | null;
  deploy_step: Record<string, unknown>;
  [k: string]: unknown;
}

export interface Answer {
  status: number;
  body: string;
  json<T = unknown>(): T;
}

/** One request to the API: `inject` into an app, or real HTTP to a base URL. */
export type ApiCall = (method: string, url: string, payload?: unknown, headers?: Record<string, string>) => Promise<Answer>;

const LATEST = { 'x-openstack-ironic-api-version': 'latest' };

/** Requests injected into a fastify app, at the latest microversion unless told otherwise. */
export function injector(app: FastifyInstance): ApiCall {
  return async (method, url, payload, headers = {}) => {
    const res = await app.inject({
      method: method as 'GET', url, headers: { ...LATEST, ...headers },
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    return { status: res.statusCode, body: res.body, json: <T>() => JSON.parse(res.body) as T };
  };
}

/** Requests over HTTP to `base`, at the latest microversion unless told otherwise. */
export function httpClient(base: string): ApiCall {
  return async (method, url, payload, headers = {}) => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { ...LATEST, ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
    });
    const body = await res.text();
    return { status: res.status, body, json: <T>() => JSON.parse(body) as T };
  };
}

export async function getNode(api: ApiCall, ident: string): Promise<NodeView> {
  const res = await api('GET', `/v1/nodes/${ident}`);
  expect(res.status, res.body).to.equal(200);
  return res.json<NodeView>();
}

/** Asks for a provision verb and expects 202. */
export async function provision(api: ApiCall, ident: string, target: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await api('PUT', `/v1/nodes/${ident}/states/provision`, { target, ...extra });
  expect(res.status, `${target}: ${res.body}`).to.equal(202);
}

/** Polls until the node's transition has ended (no target state), and returns it. */
export function settled(api: ApiCall, ident: string, timeoutMs = 30_000): Promise<NodeView> {
  return untilNode(api, ident, (n) => n.target_provision_state === null && n.reservation === null, 'to end its transition', timeoutMs);
}

/** Polls until `pred` holds for the node, and returns it; a timeout shows the node as last seen. */
export function untilNode(api: ApiCall, uuid: string, pred: (n: NodeView) => boolean, what: string, timeoutMs = 20_000): Promise<NodeView> {
  let last: NodeView | undefined;
  return until(() => `node ${uuid} ${what}: ${JSON.stringify(last)}`, async () => {
    last = await getNode(api, uuid);
    return pred(last) && last;
  }, timeoutMs, 50);
}

/** Asks for a verb, waits for the transition to end, and returns the node. */
export async function provisionAndSettle(api: ApiCall, ident: string, target: string, extra: Record<string, unknown> = {}, timeoutMs?: number): Promise<NodeView> {
  await provision(api, ident, target, extra);
  return settled(api, ident, timeoutMs);
}

/** The body of a node driven by the redfish hardware type with virtual media and the ramdisk deploy. */
export function redfishNodeBody(name: string, bmcUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    driver: 'redfish',
    boot_interface: 'redfish-virtual-media',
    deploy_interface: 'ramdisk',
    inspect_interface: 'redfish',
    driver_info: { redfish_address: bmcUrl, redfish_username: 'admin', redfish_password: 'password' },
    ...extra,
  };
}

export async function createNode(api: ApiCall, body: Record<string, unknown>): Promise<NodeView> {
  const res = await api('POST', '/v1/nodes', body);
  expect(res.status, res.body).to.equal(201);
  return res.json<NodeView>();
}

export async function nodePorts(api: ApiCall, uuid: string): Promise<string[]> {
  const res = await api('GET', `/v1/ports?node=${uuid}&fields=address`);
  expect(res.status, res.body).to.equal(200);
  return res.json<{ ports: Array<{ address: string }> }>().ports.map((p) => p.address).sort();
}

export async function nodeHistory(api: ApiCall, uuid: string): Promise<Array<{ event: string; severity: string; event_type: string }>> {
  const res = await api('GET', `/v1/nodes/${uuid}/history?detail=true`);
  expect(res.status, res.body).to.equal(200);
  return res.json<{ history: Array<{ event: string; severity: string; event_type: string }> }>().history;
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The simulator's event log of one BMC. */
export async function simEvents(bmcUrl: string): Promise<Json[]> {
  return ((await (await fetch(`${bmcUrl}/_sim/events`)).json()) as { events: Json[] }).events;
}

export async function clearSimEvents(bmcUrl: string): Promise<void> {
  const res = await fetch(`${bmcUrl}/_sim/events`, { method: 'POST' });
  expect(res.ok).to.equal(true);
}

/** The simulator's state of one BMC: systems (power, boot, running) and media slots. */
export async function simState(bmcUrl: string): Promise<{ systems: Record<string, Json>; media: Record<string, Json> }> {
  return (await (await fetch(`${bmcUrl}/_sim/state`)).json()) as { systems: Record<string, Json>; media: Record<string, Json> };
}

/** Events as short strings: "insert live.iso", "boot-override Cd/Continuous", "reset On", … */
export function story(events: Json[]): string[] {
  const base = (s: unknown) => String(s).split('/').pop() as string;
  return events.map((e) => {
    switch (e.type) {
      case 'insert':
      case 'eject':
        return `${e.type as string} ${base(e.image)}`;
      case 'boot-override':
        return `boot-override ${e.target as string}/${e.enabled as string}${e.consumed ? ' (consumed)' : ''}`;
      case 'reset':
        return `reset ${e.resetType as string}`;
      case 'boot-started':
      case 'boot-finished':
      case 'boot-failed':
        return `${e.type as string} ${e.device as string}${e.image ? ` ${base(e.image)}` : ''}`;
      case 'refused':
        return `refused ${e.call as string} ${e.status as number}`;
      default:
        return e.type as string;
    }
  });
}

/** Index of the first entry matching `re` at or after `from`, or -1. */
export function indexOfMatch(lines: string[], re: RegExp, from = 0): number {
  for (let i = from; i < lines.length; i++) if (re.test(lines[i])) return i;
  return -1;
}

/** Asserts that entries matching each pattern appear in this order (others may come between). */
export function expectInOrder(lines: string[], patterns: RegExp[]): void {
  let at = 0;
  for (const re of patterns) {
    const i = indexOfMatch(lines, re, at);
    expect(i, `${re} after position ${at} in:\n${lines.join('\n')}`).to.be.at.least(0);
    at = i + 1;
  }
}

/** Media slots that hold something. */
export function insertedMedia(state: { media: Record<string, Json> }): string[] {
  return Object.entries(state.media).filter(([, m]) => m.inserted === true).map(([slot, m]) => `${slot}: ${m.image as string}`);
}
