import type { Node } from '../db/nodes.js';

/** oslo jsonutils' datetime (timeutils.PERFECT_TIME_FORMAT): microseconds, no zone. */
function perfectTime(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '000') : null;
}

/**
 * Ironic's Node.as_dict(): the node's fields under the names of Ironic's Node object, unmasked,
 * as the conductor hands them to the agent with its step commands (the agent session masks
 * them, drivers/agent/session.ts). Galvanic keeps no chassis_id, conductor_affinity,
 * instance_name or health; boot_mode and secure_boot are null, as the API shows them; the
 * traits, a table of their own, are left out (no agent step reads them).
 */
export function nodeAsDict(node: Node): Record<string, unknown> {
  return {
    id: node.id,
    uuid: node.uuid,
    name: node.name,
    instance_uuid: node.instanceUuid,
    driver: node.driver,
    driver_info: node.driverInfo,
    driver_internal_info: node.driverInternalInfo,
    clean_step: node.cleanStep,
    deploy_step: node.deployStep,
    service_step: node.serviceStep,
    raid_config: node.raidConfig,
    target_raid_config: node.targetRaidConfig,
    instance_info: node.instanceInfo,
    properties: node.properties,
    reservation: node.reservation,
    conductor_group: node.conductorGroup,
    power_state: node.powerState,
    target_power_state: node.targetPowerState,
    provision_state: node.provisionState,
    provision_updated_at: perfectTime(node.provisionUpdatedAt),
    target_provision_state: node.targetProvisionState,
    maintenance: node.maintenance,
    maintenance_reason: node.maintenanceReason,
    fault: node.fault,
    console_enabled: node.consoleEnabled,
    last_error: node.lastError,
    resource_class: node.resourceClass,
    inspection_finished_at: perfectTime(node.inspectionFinishedAt),
    inspection_started_at: perfectTime(node.inspectionStartedAt),
    extra: node.extra,
    automated_clean: node.automatedClean,
    protected: node.protected,
    protected_reason: node.protectedReason,
    allocation_id: node.allocationId,
    bios_interface: node.biosInterface,
    boot_interface: node.bootInterface,
    console_interface: node.consoleInterface,
    deploy_interface: node.deployInterface,
    firmware_interface: node.firmwareInterface,
    inspect_interface: node.inspectInterface,
    management_interface: node.managementInterface,
    network_interface: node.networkInterface,
    power_interface: node.powerInterface,
    raid_interface: node.raidInterface,
    rescue_interface: node.rescueInterface,
    storage_interface: node.storageInterface,
    vendor_interface: node.vendorInterface,
    owner: node.owner,
    lessee: node.lessee,
    description: node.description,
    retired: node.retired,
    retired_reason: node.retiredReason,
    network_data: node.networkData,
    boot_mode: null,
    secure_boot: null,
    shard: node.shard,
    parent_node: node.parentNode,
    disable_power_off: node.disablePowerOff,
    created_at: perfectTime(node.createdAt),
    updated_at: perfectTime(node.updatedAt),
  };
}
