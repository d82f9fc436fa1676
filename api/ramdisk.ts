/**
 * The agent-facing API (Ironic's api/controllers/v1/ramdisk.py): `GET /v1/lookup` (1.22) and
 * `POST /v1/heartbeat/{node}` (1.22; agent_version 1.36, agent_token 1.62, agent_verify_ca
 * 1.68). Both are public, as in Ironic: the agent has no credentials but its token.
 *
 * agent_verify_ca is the self-signed certificate of an agent's automatic TLS (IPA ≥ 7): kept
 * in driver_internal_info as the PEM itself (Ironic writes it to a file under [agent]
 * certificates_path and keeps the path; any conductor here may take the node over), and
 * pinned by the conductor's agent client for that agent's URL.
 *
 * The token is minted at the first lookup of a node (later lookups see `******`; one while a
 * conductor holds the node is refused with 409, as Ironic's, and the agent asks again), kept
 * apart from the node (db/agent-tokens.ts) and required on every heartbeat. A heartbeat records the
 * agent's URL and version, moves the wait state's deadline on (Ironic's touch_provisioning),
 * and queues one `agent_continue` intent that the node's conductor runs: any API server may
 * take it. While a conductor holds the node, it records nothing (as Ironic) but still wakes
 * the node's work. Heartbeats that arrive together are recorded in one transaction. A node in
 * maintenance has its heartbeats recorded and nothing more while `[conductor]
 * allow_provisioning_in_maintenance` holds (its run pauses); otherwise they queue the continue,
 * which aborts the run.
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Knex } from 'knex';
import { InvalidParameterValue, NodeLocked, NodeNotFound, ResourceNotFound, IncompleteLookup } from '../common/errors.js';
import { HEARTBEAT_ALLOWED_STATES, LOOKUP_ALLOWED_STATES, ProvisionState } from '../common/states.js';
import { Batcher, type BatchOutcome } from '../common/batcher.js';
import { agentTokenMatches, lockNodesWithTokens, mintAgentToken } from '../db/agent-tokens.js';
import { INTENT_CHANNEL, enqueueIntentsOfNodes, intentWakePayload, nodesWithQueuedIntent, wakeWaitingSteps, type IntentWake } from '../db/intents.js';
import { getNode, updateLockedNodes, type LockedNodeChange, type Node } from '../db/nodes.js';
import { nodesByPortAddresses } from '../db/ports.js';
import { withTransaction } from '../db/transaction.js';
import type { ApiDeps } from './deps.js';
import type { IntentAcceptor } from './intents.js';
import { isUuid } from './body.js';
import { baseUrl, resourceLinks } from './links.js';
import { maskSecrets, MASK } from '../common/masking.js';
import { pausedInMaintenance, type ProvisionOptions } from '../drivers/provision-checks.js';

const S = ProvisionState;

/**
 * States in which a heartbeat makes the conductor carry the run on. In deploying / cleaning the
 * conductor is at a step that may end in a wait: the continue queued behind it then looks.
 */
const CONTINUES: ReadonlySet<string> = new Set([S.DEPLOYWAIT, S.CLEANWAIT, S.SERVICEWAIT, S.DEPLOYING, S.CLEANING, S.SERVICING]);
const WAITS: ReadonlySet<string> = new Set([S.DEPLOYWAIT, S.CLEANWAIT, S.SERVICEWAIT]);
const AGENT_STATUSES = ['start', 'end', 'error'];

/** Heartbeat body fields and the microversion that introduced each. */
const HEARTBEAT_FIELDS: Record<string, number> = {
  callback_url: 22, agent_version: 36, agent_token: 62, agent_verify_ca: 68, agent_status: 72, agent_status_message: 72,
};

const notFound = () => new ResourceNotFound('Resource could not be found.');

/** Ironic's validate_and_normalize_mac: six octets, ':' or '-' separated, lowercased. */
function normalizeMac(v: string): string | undefined {
  const s = v.trim().toLowerCase();
  return /^[0-9a-f]{2}([:-][0-9a-f]{2}){5}$/.test(s) ? s.replace(/-/g, ':') : undefined;
}

function queryString(q: Record<string, unknown>, name: string): string | undefined {
  const v = q[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) return v.map(String).join(',');
  return String(v);
}

/** The lookup's answer (ramdisk.py convert_with_links + config). */
export function lookupBody(node: Node, token: string | null, base: string, heartbeatTimeout: number): Record<string, unknown> {
  return {
    node: {
      uuid: node.uuid,
      properties: node.properties,
      instance_info: maskSecrets(node.instanceInfo),
      driver_internal_info: maskSecrets(node.driverInternalInfo),
      links: resourceLinks(base, 'nodes', node.uuid),
    },
    config: {
      metrics: { backend: 'noop', prepend_host: false, prepend_uuid: false, prepend_host_reverse: true, global_prefix: null },
      metrics_statsd: { statsd_host: 'localhost', statsd_port: 8125 },
      heartbeat_timeout: heartbeatTimeout,
      agent_token: token,
      agent_token_required: true,
      agent_md5_checksum_enable: false,
      disable_deep_image_inspection: false,
      permitted_image_formats: ['raw', 'qcow2', 'iso'],
      agent_skip_bmc_detect: node.managementInterface === 'redfish' || node.managementInterface === 'idrac-redfish',
      enable_bios_bootloader_install: false,
      tls_min_version: '1.2',
      tls_cipher_suites: null,
    },
  };
}

/** One heartbeat, checked for its form: what the batch checks against its node. */
interface Heartbeat {
  ident: string;
  callbackUrl: string;
  /** The callback URL's scheme ('' when it does not parse). */
  scheme: string;
  token?: string;
  status?: string;
  statusMessage?: string;
  agentVersion?: string;
  verifyCa: unknown;
  /** `[agent] require_tls`. */
  requireTls: boolean;
  log: FastifyBaseLogger;
  requestId: string;
}

/** Most heartbeats recorded in one transaction. */
const HEARTBEAT_BATCH = 200;

/**
 * Records a batch of heartbeats in one transaction (group commit, as the conductor records its
 * outcomes): their nodes locked in one statement, each heartbeat checked in order against its
 * node as the heartbeats before it in the batch left it, the changes written, the waiting steps
 * woken and the continues queued, each in one statement. 1,000 agents heartbeat in bursts: one
 * transaction of four statements each made Postgres the API's bottleneck. A heartbeat refused
 * has its error alone and changes nothing.
 */
async function recordHeartbeats(
  trx: Knex.Transaction, batch: readonly Heartbeat[], options: ProvisionOptions,
): Promise<{ outcomes: Array<BatchOutcome<void>>; wakes: IntentWake[] }> {
  const locked = await lockNodesWithTokens(trx, batch.map((h) => h.ident));
  // Each node as this batch has left it so far, and what it writes.
  const current = new Map<number, Node>();
  const changes = new Map<number, LockedNodeChange>();
  const continues = new Map<number, Node>();
  const outcomes = batch.map((h): BatchOutcome<void> => {
    try {
      const entry = locked.get(h.ident);
      if (!entry) throw new NodeNotFound(h.ident);
      const node = current.get(entry.node.id) ?? entry.node;
      const next = heartbeatChanges(h, node, agentTokenMatches(entry.token, h.token));
      if (next === undefined) return { value: undefined };
      // Ironic's touch_provisioning is part of the action a paused run does not take.
      const paused = pausedInMaintenance(node, options);
      // Ironic's heartbeat skips a node its conductor holds (upgrade_lock fails, "will retry on
      // the next heartbeat") and records nothing; the step at work is still told to look again.
      if (node.reservation === null) {
        const change = { driverInternalInfo: next, ...(WAITS.has(node.provisionState) && !paused ? { provisionUpdatedAt: new Date() } : {}) };
        const before = changes.get(node.id);
        changes.set(node.id, { before: entry.node, changes: { ...before?.changes, ...change } });
        current.set(node.id, { ...node, driverInternalInfo: next });
      }
      if (paused) {
        if (WAITS.has(node.provisionState)) h.log.warn({ node: node.uuid }, 'heartbeat from a node in maintenance mode; not taking any action');
        return { value: undefined };
      }
      if (CONTINUES.has(node.provisionState)) continues.set(node.id, node);
      return { value: undefined };
    } catch (error) {
      return { error };
    }
  });
  await updateLockedNodes(trx, [...changes.values()]);
  // A group operation's step waits for this agent: it is what carries the run on. The wake-up
  // names it, so that a conductor running it already does not claim again for it.
  const woken = await wakeWaitingSteps(trx, [...continues.keys()]);
  const wakes: IntentWake[] = [];
  for (const [id, seq] of woken) wakes.push({ nodeUuid: continues.get(id)!.uuid, seq });
  const rest = [...continues.keys()].filter((id) => !woken.has(id));
  const queued = await nodesWithQueuedIntent(trx, rest, 'agent_continue');
  const requestOf = new Map(batch.map((h) => [locked.get(h.ident)?.node.id, h.requestId]));
  const added = await enqueueIntentsOfNodes(trx, rest.filter((id) => !queued.has(id)).map((nodeId) => ({
    nodeId, intent: { kind: 'agent_continue', args: {}, maxAttempts: 1, requester: null, requestId: requestOf.get(nodeId) },
  })));
  for (const intent of added) wakes.push({ nodeUuid: continues.get(intent.nodeId)!.uuid, seq: intent.seq });
  return { outcomes, wakes };
}

/**
 * Checks one heartbeat against its node (Ironic's order of checks and messages) and returns the
 * node's new driver_internal_info, or undefined when the heartbeat is taken but acted on in no
 * way (a state that takes none). Throws what refuses it.
 */
function heartbeatChanges(h: Heartbeat, node: Node, tokenMatches: boolean): Record<string, unknown> | undefined {
  if (!h.scheme.includes('http') && h.callbackUrl !== '') throw new InvalidParameterValue('An issue with the supplied "callback_url" has been detected.');
  const info = node.driverInternalInfo;
  const known = info.agent_url;
  if (typeof known === 'string' && known !== h.callbackUrl) throw new InvalidParameterValue('Detected change in ramdisk provided "callback_url"');
  if (h.token === undefined) throw new InvalidParameterValue('Agent token is required for heartbeat processing.');
  if (h.status !== undefined && !AGENT_STATUSES.includes(h.status)) throw new InvalidParameterValue(`Agent status is invalid. Valid states are ${AGENT_STATUSES.join(',')}.`);
  if (h.agentVersion === undefined && h.status === undefined) {
    throw new InvalidParameterValue('Agent did not transmit a version, and a version is required. Please update the agent being used.');
  }
  if (!tokenMatches) {
    // The token itself is never logged, whichever it was.
    h.log.warn({ node: node.uuid }, 'heartbeat refused: invalid or missing agent token');
    throw new InvalidParameterValue('Invalid or missing agent token received.');
  }
  if (h.requireTls && h.callbackUrl && !h.callbackUrl.startsWith('https://')) throw new InvalidParameterValue('TLS is required by configuration');
  // The agent's certificate is pinned for the agent's life: another one is not this agent's.
  const pinned = info.agent_verify_ca;
  if (typeof h.verifyCa === 'string' && h.verifyCa && typeof pinned === 'string' && pinned.trim() !== h.verifyCa.trim()) {
    h.log.warn({ node: node.uuid }, 'heartbeat refused: its agent_verify_ca differs from the one recorded');
    throw new InvalidParameterValue('Detected change in ramdisk provided "agent_verify_ca"');
  }
  if (!HEARTBEAT_ALLOWED_STATES.has(node.provisionState)) {
    h.log.warn({ node: node.uuid, state: node.provisionState }, 'heartbeat in a state that takes none; not taking any action');
    return undefined;
  }
  // Ironic's 409: the conductor is still at work and has not seen this agent yet (it retries in seconds).
  if (typeof info.agent_url !== 'string' && node.reservation) throw new NodeLocked(node.uuid, node.reservation);
  const next: Record<string, unknown> = { ...info, agent_url: h.callbackUrl, agent_version: h.agentVersion ?? info.agent_version ?? null, agent_last_heartbeat: new Date().toISOString() };
  if (h.verifyCa) next.agent_verify_ca = h.verifyCa;
  if (h.status !== undefined) next.agent_status = h.status;
  if (h.statusMessage !== undefined) next.agent_status_message = h.statusMessage;
  return next;
}

export function registerRamdiskRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config } = deps;
  const heartbeats = new Batcher<Heartbeat, void>(async (batch) => {
    const { outcomes, wakes } = await withTransaction(db, (trx) => recordHeartbeats(trx, batch, config.conductor));
    for (const wake of wakes) acceptor.wake.notify(INTENT_CHANNEL, intentWakePayload(wake));
    return outcomes;
  }, HEARTBEAT_BATCH);

  /**
   * The agent's token, minted once no conductor holds the node. Ironic's get_node_with_token
   * takes the node's lock as any conductor call does, waiting node_locked_retry_attempts times,
   * node_locked_retry_interval apart, before NodeLocked (409): an agent that boots while the
   * task that booted it is still finishing gets its token then, not after its own retry.
   */
  const mintTokenWhenFree = async (nodeId: number): Promise<string | null> => {
    const { node_locked_retry_attempts: attempts, node_locked_retry_interval: interval } = config.conductor;
    for (let attempt = 1; ; attempt++) {
      try {
        return await mintAgentToken(db, nodeId, { unlessHeld: true });
      } catch (err) {
        if (!(err instanceof NodeLocked) || attempt >= attempts) throw err;
        await new Promise((r) => setTimeout(r, interval * 1000));
      }
    }
  };

  app.get('/v1/lookup', async (req) => {
    if (!req.apiVersion.atLeast(22)) throw notFound();
    const q = req.query as Record<string, unknown>;
    const unknown = Object.keys(q).filter((k) => k !== 'addresses' && k !== 'node_uuid');
    if (unknown.length) throw new InvalidParameterValue(`Unknown argument: "${unknown.join(', ')}"`);
    const nodeUuid = queryString(q, 'node_uuid');
    if (nodeUuid !== undefined && !isUuid(nodeUuid)) throw new InvalidParameterValue(`Expected UUID for node_uuid: ${nodeUuid}`);
    const addresses = (queryString(q, 'addresses') ?? '').split(',').filter((a) => a !== '');
    const macs = addresses.map(normalizeMac).filter((m): m is string => m !== undefined);
    if (macs.length < addresses.length) req.log.warn({ invalid: addresses.length - macs.length }, 'lookup: invalid MAC addresses ignored');
    if (!macs.length && !nodeUuid) throw new IncompleteLookup();
    let node: Node | undefined;
    if (nodeUuid) {
      node = await getNode(db, nodeUuid).catch(() => undefined);
    } else {
      const byMac = await nodesByPortAddresses(db, macs);
      if (byMac.length === 1) node = byMac[0];
    }
    // Absent and in the wrong state look the same: the lookup must not tell which nodes exist.
    if (!node || (config.api.restrict_lookup && !LOOKUP_ALLOWED_STATES.has(node.provisionState))) throw notFound();
    let token: string | null = null;
    if (req.apiVersion.atLeast(62)) token = (await mintTokenWhenFree(node.id)) ?? MASK;
    return lookupBody(node, token, baseUrl(req, config.api.public_endpoint), config.api.ramdisk_heartbeat_timeout);
  });

  app.post('/v1/heartbeat/:node', async (req, reply) => {
    if (!req.apiVersion.atLeast(22)) throw notFound();
    const body = req.body;
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidParameterValue('Invalid heartbeat: the body must be a JSON object.');
    }
    const b = body as Record<string, unknown>;
    for (const k of Object.keys(b)) {
      const since = Object.hasOwn(HEARTBEAT_FIELDS, k) ? HEARTBEAT_FIELDS[k] : undefined;
      if (since === undefined) throw new InvalidParameterValue(`Unknown argument: "${k}"`);
      if (b[k] !== null && typeof b[k] !== 'string') throw new InvalidParameterValue(`Expected string for ${k}: ${JSON.stringify(b[k])}`);
    }
    const field = (k: string) => (typeof b[k] === 'string' ? (b[k] as string) : undefined);
    const callbackUrl = field('callback_url');
    if (callbackUrl === undefined) throw new InvalidParameterValue('Missing argument: "callback_url"');
    const agentVersion = field('agent_version');
    if (agentVersion && !req.apiVersion.atLeast(36)) throw new InvalidParameterValue('Field "agent_version" not recognised');
    if ((b.agent_status !== undefined || b.agent_status_message !== undefined) && !req.apiVersion.atLeast(72)) {
      throw new InvalidParameterValue('Fields "agent_status" and "agent_status_message" not recognised.');
    }
    if (b.agent_verify_ca !== undefined && !req.apiVersion.atLeast(68)) throw new InvalidParameterValue('Field "agent_verify_ca" not recognised in this version');
    const ident = (req.params as { node: string }).node;
    let scheme = '';
    try {
      scheme = new URL(callbackUrl).protocol;
    } catch {
      scheme = '';
    }
    await heartbeats.submit({
      ident, callbackUrl, scheme, token: field('agent_token'), status: field('agent_status'), statusMessage: field('agent_status_message'),
      agentVersion, verifyCa: b.agent_verify_ca, requireTls: config.agent.require_tls, log: req.log, requestId: req.id,
    });
    reply.code(202).send();
  });
}
