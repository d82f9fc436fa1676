import type { Node } from '../db/nodes.js';

/** The node fields Ironic's NodePayload carries (secrets never included). */
export function nodePayload(node: Node, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    uuid: node.uuid,
    name: node.name,
    driver: node.driver,
    power_state: node.powerState,
    target_power_state: node.targetPowerState,
    provision_state: node.provisionState,
    target_provision_state: node.targetProvisionState,
    maintenance: node.maintenance,
    maintenance_reason: node.maintenanceReason,
    fault: node.fault,
    last_error: node.lastError,
    conductor_group: node.conductorGroup,
    owner: node.owner,
    lessee: node.lessee,
    resource_class: node.resourceClass,
    console_enabled: node.consoleEnabled,
    instance_uuid: node.instanceUuid,
    power_interface: node.powerInterface,
    management_interface: node.managementInterface,
    console_interface: node.consoleInterface,
    created_at: node.createdAt?.toISOString() ?? null,
    updated_at: node.updatedAt?.toISOString() ?? null,
    ...extra,
  };
}
