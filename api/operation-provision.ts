/**
 * Provision verbs as steps of a group operation (`deploy`, `undeploy`, `inspect`, `provide`,
 * `manage`): checked as `PUT /v1/nodes/{n}/states/provision` checks them, the body against the
 * request's microversion and every node against the state machine and its interfaces, before
 * anything is written. The transition itself starts when the node's turn comes (the
 * conductor's `provision_step`, which checks again).
 */
import type { FastifyRequest } from 'fastify';
import type { Knex } from 'knex';
import type { Config } from '../common/config.js';
import { InvalidParameterValue } from '../common/errors.js';
import { getNodesByIds, isUuid, updateLockedNodes, type Node } from '../db/nodes.js';
import { nodesWithOpenIntents, type OperationStep } from '../db/operations.js';
import { checkNodeForProvision, provisionTransition, type ProvisionOptions } from '../drivers/provision-checks.js';
import type { DriverRegistry } from '../drivers/registry.js';
import { requireObject } from './body.js';
import { checkProvisionBody } from './provision.js';

/** The intent kind of a provision step. */
export const PROVISION_STEP_KIND = 'provision_step';

/** Step actions that are provision verbs, and the arguments each takes. */
const PROVISION_STEP_ARGS: Record<string, readonly string[]> = {
  deploy: ['instance_info', 'node_instance_info', 'configdrive'],
  undeploy: [], inspect: [], provide: [], manage: [],
};

/** A provision step as asked: the verb, and what a deploy writes into the nodes' instance_info. */
export interface ProvisionStepRequest {
  verb: string;
  instanceInfo?: Record<string, unknown>;
  /** instance_info per node (UUID or name), over `instanceInfo`. */
  nodeInstanceInfo?: Record<string, Record<string, unknown>>;
  configdrive?: unknown;
}

export function isProvisionStep(raw: unknown): boolean {
  const action = raw && typeof raw === 'object' ? (raw as Record<string, unknown>).action : undefined;
  return typeof action === 'string' && Object.hasOwn(PROVISION_STEP_ARGS, action);
}

/** Checks a provision step (`{action: verb, args}`, step `index` of the request). */
export function parseProvisionStep(raw: unknown, index: number, req: FastifyRequest): ProvisionStepRequest {
  const step = requireObject(raw, `step ${index}`);
  const unknown = Object.keys(step).filter((k) => k !== 'action' && k !== 'args');
  if (unknown.length) throw new InvalidParameterValue(`Unknown attribute(s) in step ${index}: ${unknown.join(', ')}`);
  const verb = step.action as string;
  const args = step.args === undefined ? {} : requireObject(step.args, `step ${index} args`);
  const extra = Object.keys(args).filter((k) => !PROVISION_STEP_ARGS[verb].includes(k));
  if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for the ${verb} step ${index}: ${extra.join(', ')}`);
  // The body PUT …/states/provision would get: its rules (microversion floors, configdrive) apply.
  // Ironic takes a configdrive with `active` only (not its `deploy` alias): checked as that.
  checkProvisionBody({ target: verb }, req);
  const configdrive = args.configdrive === undefined ? undefined : checkProvisionBody({ target: 'active', configdrive: args.configdrive }, req).configdrive;
  const out: ProvisionStepRequest = { verb };
  if (args.instance_info !== undefined) out.instanceInfo = requireObject(args.instance_info, `step ${index} instance_info`);
  if (args.node_instance_info !== undefined) {
    const byNode = requireObject(args.node_instance_info, `step ${index} node_instance_info`);
    out.nodeInstanceInfo = Object.fromEntries(Object.entries(byNode).map(([ident, ii]) => [ident, requireObject(ii, `step ${index} node_instance_info "${ident}"`)]));
  }
  if (configdrive !== undefined) out.configdrive = configdrive;
  return out;
}

/** The intent step queued on every node for a provision step. */
export function provisionIntentStep(p: ProvisionStepRequest, config: Readonly<Config>): OperationStep {
  return { kind: PROVISION_STEP_KIND, args: { verb: p.verb, automatedCleanDefault: config.conductor.automated_clean } };
}

/** How the operation's status shows a step: a provision step as its verb. */
export function stepView(s: OperationStep): { action: string; args: Record<string, unknown> } {
  return s.kind === PROVISION_STEP_KIND ? { action: String(s.args.verb), args: {} } : { action: s.kind, args: s.args };
}

/**
 * Checks every node of the operation for its provision steps, in order (each from the state
 * the one before leads to), against its instance_info as the deploy step would leave it; then
 * writes those instance_info changes. The nodes' rows must be locked. A node with work still
 * queued, in an operation that queues behind it, is checked when its step starts instead: its
 * state will have changed by then.
 * @throws as PUT …/states/provision would for the first node that fails a rule
 */
export async function prepareProvisionSteps(
  trx: Knex.Transaction, registry: DriverRegistry, options: ProvisionOptions, steps: readonly ProvisionStepRequest[], nodeIds: readonly number[], queue: boolean,
): Promise<void> {
  if (steps.length === 0) return;
  const nodes = new Map((await getNodesByIds(trx, nodeIds)).map((n) => [n.id, n]));
  const byIdent = new Map<string, Node>();
  for (const n of nodes.values()) {
    byIdent.set(n.uuid, n);
    if (n.name !== null) byIdent.set(n.name, n);
  }
  const extraInfo = new Map<number, Record<string, unknown>>();
  for (const s of steps) {
    for (const [ident, ii] of Object.entries(s.nodeInstanceInfo ?? {})) {
      const n = byIdent.get(isUuid(ident) ? ident.toLowerCase() : ident);
      if (!n) throw new InvalidParameterValue(`"node_instance_info" names ${ident}, which is not a node of this operation.`);
      extraInfo.set(n.id, { ...extraInfo.get(n.id), ...ii });
    }
  }
  const deploy = steps.find((s) => s.verb === 'deploy');
  const busy = queue ? await nodesWithOpenIntents(trx, nodeIds) : new Set<number>();
  const updates: Array<{ before: Node; changes: { instanceInfo: Record<string, unknown> } }> = [];
  for (const id of nodeIds) {
    const node = nodes.get(id)!;
    const writes = deploy !== undefined && (deploy.instanceInfo !== undefined || deploy.configdrive !== undefined || extraInfo.has(id));
    const instanceInfo = writes
      ? { ...node.instanceInfo, ...deploy!.instanceInfo, ...extraInfo.get(id), ...(deploy!.configdrive !== undefined ? { configdrive: deploy!.configdrive } : {}) }
      : node.instanceInfo;
    if (!busy.has(id)) {
      let state = node.provisionState;
      for (const [i, s] of steps.entries()) {
        // A later step starts from where the one before leaves the node, which this request holds.
        const as = { ...node, instanceInfo, provisionState: state };
        const t = provisionTransition(as, s.verb, i > 0);
        checkNodeForProvision(registry, as, s.verb, t, options);
        state = t.target;
      }
    }
    if (writes) updates.push({ before: node, changes: { instanceInfo } });
  }
  if (updates.length) await updateLockedNodes(trx, updates);
}
