/**
 * Typed errors. Thrown deep, turned into HTTP once (api/error-handler.ts).
 * Each class carries a stable `code` and the HTTP status of its family; call
 * sites never choose a status themselves.
 */

export abstract class GalvanicError extends Error {
  abstract readonly code: string;
  readonly httpStatus: number = 500;
  /** True when the failure is the client's (Ironic's faultcode "Client"). */
  get isClientError(): boolean {
    return this.httpStatus < 500;
  }
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** 400 family. */
export abstract class BadRequestError extends GalvanicError {
  override readonly httpStatus: number = 400;
}
export class InvalidParameterValue extends BadRequestError {
  readonly code = 'INVALID_PARAMETER_VALUE';
}
export class MissingParameterValue extends BadRequestError {
  readonly code = 'MISSING_PARAMETER_VALUE';
}
export class PatchError extends BadRequestError {
  readonly code = 'PATCH_ERROR';
}
export class InvalidStateRequested extends BadRequestError {
  readonly code = 'INVALID_STATE_REQUESTED';
}
export class InterfaceNotFoundInEntrypoint extends BadRequestError {
  readonly code = 'INTERFACE_NOT_FOUND';
}
export class DriverNotFoundInEntrypoint extends BadRequestError {
  readonly code = 'DRIVER_NOT_FOUND_IN_ENTRYPOINT';
}

export class NotAuthorized extends GalvanicError {
  readonly code = 'NOT_AUTHORIZED';
  override readonly httpStatus: number = 401;
}

/** 403: authenticated, but this user may not do this (e.g. a read-write console). */
export class Forbidden extends GalvanicError {
  readonly code = 'FORBIDDEN';
  override readonly httpStatus: number = 403;
}

/** A console token that is unknown, expired, or bound to an older access epoch. */
export class ConsoleTokenRefused extends GalvanicError {
  readonly code = 'CONSOLE_TOKEN_REFUSED';
  // 403, not 401: a 401 would make browsers offer a password dialog for a console page.
  override readonly httpStatus: number = 403;
}

/** 404 family. */
export abstract class NotFoundError extends GalvanicError {
  override readonly httpStatus: number = 404;
}
export class NodeNotFound extends NotFoundError {
  readonly code = 'NODE_NOT_FOUND';
  constructor(ident: string) {
    super(`Node ${ident} could not be found.`);
  }
}
export class PortNotFound extends NotFoundError {
  readonly code = 'PORT_NOT_FOUND';
  constructor(ident: string) {
    super(`Port ${ident} could not be found.`);
  }
}
export class DriverNotFound extends NotFoundError {
  readonly code = 'DRIVER_NOT_FOUND';
  constructor(name: string) {
    super(`Could not find the following driver(s) or hardware type(s): ${name}.`);
  }
}
export class ConductorNotFound extends NotFoundError {
  readonly code = 'CONDUCTOR_NOT_FOUND';
  constructor(hostname: string) {
    super(`Conductor ${hostname} could not be found.`);
  }
}
export class NodeHistoryNotFound extends NotFoundError {
  readonly code = 'NODE_HISTORY_NOT_FOUND';
  constructor(id: string) {
    super(`Node history record ${id} could not be found.`);
  }
}
export class IntentNotFound extends NotFoundError {
  readonly code = 'INTENT_NOT_FOUND';
  constructor(id: string) {
    super(`Intent ${id} could not be found.`);
  }
}
export class OperationNotFound extends NotFoundError {
  readonly code = 'OPERATION_NOT_FOUND';
  constructor(id: string) {
    super(`Operation ${id} could not be found.`);
  }
}
export class ChassisNotFound extends NotFoundError {
  readonly code = 'CHASSIS_NOT_FOUND';
  constructor(ident: string) {
    super(`Chassis ${ident} could not be found.`);
  }
}
export class PortgroupNotFound extends NotFoundError {
  readonly code = 'PORTGROUP_NOT_FOUND';
  constructor(ident: string) {
    super(`Portgroup ${ident} could not be found.`);
  }
}
/**
 * A resource a request body names (a node's chassis, a port's node or portgroup) does not
 * exist: the body's fault, so 400 with the not-found message, as Ironic answers.
 */
export class ReferencedResourceNotFound extends BadRequestError {
  readonly code = 'REFERENCED_RESOURCE_NOT_FOUND';
  constructor(notFound: NotFoundError) {
    super(notFound.message);
  }
}
/** Ironic's ChassisNotEmpty (an Invalid, so 400). */
export class ChassisNotEmpty extends BadRequestError {
  readonly code = 'CHASSIS_NOT_EMPTY';
  constructor(chassis: string) {
    super(`Cannot complete the requested action because chassis ${chassis} contains nodes.`);
  }
}
/** Ironic's PortgroupNotEmpty (an Invalid, so 400); the message may say more than the default. */
export class PortgroupNotEmpty extends BadRequestError {
  readonly code = 'PORTGROUP_NOT_EMPTY';
  constructor(portgroup: string, message?: string) {
    super(message ?? `Cannot complete the requested action because portgroup ${portgroup} contains ports.`);
  }
}
export class ResourceNotFound extends NotFoundError {
  readonly code = 'RESOURCE_NOT_FOUND';
}

export class MethodNotAllowed extends GalvanicError {
  readonly code = 'METHOD_NOT_ALLOWED';
  override readonly httpStatus: number = 405;
}

export class NotAcceptable extends GalvanicError {
  readonly code = 'NOT_ACCEPTABLE';
  override readonly httpStatus: number = 406;
}

/** 409 family. */
export abstract class ConflictError extends GalvanicError {
  override readonly httpStatus: number = 409;
}
export class DuplicateName extends ConflictError {
  readonly code = 'DUPLICATE_NAME';
  constructor(name: string) {
    super(`A node with name ${name} already exists.`);
  }
}
export class NodeAlreadyExists extends ConflictError {
  readonly code = 'NODE_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A node with UUID ${uuid} already exists.`);
  }
}
export class MACAlreadyExists extends ConflictError {
  readonly code = 'MAC_ALREADY_EXISTS';
  constructor(mac: string) {
    super(`A port with MAC address ${mac} already exists.`);
  }
}
export class PortAlreadyExists extends ConflictError {
  readonly code = 'PORT_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A port with UUID ${uuid} already exists.`);
  }
}
export class ChassisAlreadyExists extends ConflictError {
  readonly code = 'CHASSIS_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A chassis with UUID ${uuid} already exists.`);
  }
}
export class PortgroupAlreadyExists extends ConflictError {
  readonly code = 'PORTGROUP_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A portgroup with UUID ${uuid} already exists.`);
  }
}
export class PortgroupDuplicateName extends ConflictError {
  readonly code = 'PORTGROUP_DUPLICATE_NAME';
  constructor(name: string) {
    super(`A portgroup with name ${name} already exists.`);
  }
}
export class PortgroupMACAlreadyExists extends ConflictError {
  readonly code = 'PORTGROUP_MAC_ALREADY_EXISTS';
  constructor(mac: string) {
    super(`A portgroup with MAC address ${mac} already exists.`);
  }
}
/** Ironic's PortgroupPhysnetInconsistent: a port group's members already disagree (409 here, not Ironic's 500). */
export class PortgroupPhysnetInconsistent extends ConflictError {
  readonly code = 'PORTGROUP_PHYSNET_INCONSISTENT';
  constructor(portgroup: string, physnets: string) {
    super(`Port group ${portgroup} has member ports with inconsistent physical networks (${physnets}). All ports in a port group must have the same physical network.`);
  }
}
export class InvalidState extends ConflictError {
  readonly code = 'INVALID_STATE';
}
export class NodeLocked extends ConflictError {
  readonly code = 'NODE_LOCKED';
  constructor(node: string, host: string) {
    super(`Node ${node} is locked by host ${host}, please retry after the current operation is completed.`);
  }
}
/** A node still has work of another group operation; `"queue": true` waits for it instead. */
export class NodeInOperation extends ConflictError {
  readonly code = 'NODE_IN_OPERATION';
  constructor(node: string, readonly operation: string) {
    super(`Node ${node} is in running operation ${operation}; wait for it to end, cancel it, or ask with "queue": true to run after it.`);
  }
}
export class Conflict extends ConflictError {
  readonly code = 'CONFLICT';
}

export class PreconditionFailed extends GalvanicError {
  readonly code = 'PRECONDITION_FAILED';
  override readonly httpStatus: number = 412;
}

/** 503: the service cannot take the request now. */
export class ServiceUnavailable extends GalvanicError {
  readonly code = 'SERVICE_UNAVAILABLE';
  override readonly httpStatus: number = 503;
}

/**
 * 503 while the database cannot be reached (restart, failover, outage): nothing was done, and
 * the same request can succeed later. Ironic's clients retry a 503 (python-ironicclient,
 * openstacksdk), never a 500; `Retry-After` tells them when.
 */
export class DatabaseUnavailable extends GalvanicError {
  readonly code = 'DATABASE_UNAVAILABLE';
  override readonly httpStatus: number = 503;
  constructor(message: string, readonly retryAfterSeconds: number) {
    super(message);
  }
}

/** Configuration problems found at start; each entry reads `file:line: [section] option: what`. */
export class ConfigError extends GalvanicError {
  readonly code = 'CONFIG_ERROR';
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

/** An intent of a kind this conductor has no action for (a newer conductor queued it). */
export class UnknownIntentKind extends GalvanicError {
  readonly code = 'UNKNOWN_INTENT_KIND';
}

/** The database schema is older than this program's migrations. */
export class SchemaBehind extends GalvanicError {
  readonly code = 'SCHEMA_BEHIND';
}

/** Driver-side failures. `transient` ones are retried with backoff by the intent runner. */
export abstract class DriverError extends GalvanicError {
  get transient(): boolean {
    return false;
  }
}
export class InvalidDriverInfo extends DriverError {
  readonly code = 'INVALID_DRIVER_INFO';
  override readonly httpStatus: number = 400;
}
export class BmcTimeout extends DriverError {
  readonly code = 'BMC_TIMEOUT';
  override get transient(): boolean {
    return true;
  }
}
export class BmcUnreachable extends DriverError {
  readonly code = 'BMC_UNREACHABLE';
  override get transient(): boolean {
    return true;
  }
}
export class BmcAuthFailed extends DriverError {
  readonly code = 'BMC_AUTH_FAILED';
}
export class BmcRejected extends DriverError {
  readonly code = 'BMC_REJECTED';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
  override get transient(): boolean {
    return this.status !== undefined && this.status >= 500;
  }
}
export class BmcBadResponse extends DriverError {
  readonly code = 'BMC_BAD_RESPONSE';
}
/** Ironic's RedfishError: a Redfish operation failed; 500, as Ironic's DriverOperationError. */
export class RedfishError extends DriverError {
  readonly code: string = 'REDFISH_ERROR';
  constructor(error: string) {
    super(`Redfish exception occurred. Error: ${error}`);
  }
}
/** Ironic's RedfishError raised with code 404 (delete_subscription of a subscription the BMC lacks). */
export class RedfishErrorNotFound extends RedfishError {
  override readonly code: string = 'REDFISH_ERROR_NOT_FOUND';
  override readonly httpStatus: number = 404;
}
export class UnsupportedDriverExtension extends DriverError {
  readonly code = 'UNSUPPORTED_DRIVER_EXTENSION';
  override readonly httpStatus: number = 400;
}
/** Ironic's bare IronicException, where Ironic raises one (a driver's check of what it was given failed). */
export class IronicException extends DriverError {
  readonly code = 'IRONIC_EXCEPTION';
}
/** Ironic's UnsupportedHardwareFeature: the BMC lacks what the node's configuration needs (400, as Ironic's Invalid). */
export class UnsupportedHardwareFeature extends DriverError {
  readonly code = 'UNSUPPORTED_HARDWARE_FEATURE';
  override readonly httpStatus: number = 400;
  constructor(node: string, feature: string) {
    super(`Node ${node} hardware does not support feature ${feature}, which is required based upon the requested configuration.`);
  }
}

/** Ironic's ImageDownloadFailed: an image the conductor needs (a deploy kernel or ramdisk) could not be fetched. */
export class ImageDownloadFailed extends DriverError {
  readonly code = 'IMAGE_DOWNLOAD_FAILED';
  constructor(imageHref: string, reason: string) {
    super(`Failed to download image ${imageHref}, reason: ${reason}`);
  }
}
/** Ironic's ImageChecksumError: a downloaded image does not match the checksum it was given with. */
export class ImageChecksumError extends DriverError {
  readonly code = 'IMAGE_CHECKSUM_ERROR';
}
/** A file could not be written into the conductor's HTTP root (not writable, full). */
export class ImagePublishFailed extends DriverError {
  readonly code = 'IMAGE_PUBLISH_FAILED';
}

/** Traits, allocations and deploy templates (Ironic's messages). */
export class NodeTraitNotFound extends NotFoundError {
  readonly code = 'NODE_TRAIT_NOT_FOUND';
  constructor(node: string, trait: string) {
    super(`Node ${node} doesn't have a trait '${trait}'`);
  }
}
export class AllocationNotFound extends NotFoundError {
  readonly code = 'ALLOCATION_NOT_FOUND';
  constructor(ident: string, message = `Allocation ${ident} could not be found.`) {
    super(message);
  }
}
export class AllocationDuplicateName extends ConflictError {
  readonly code = 'ALLOCATION_DUPLICATE_NAME';
  constructor(name: string) {
    super(`An allocation with name ${name} already exists.`);
  }
}
export class AllocationAlreadyExists extends ConflictError {
  readonly code = 'ALLOCATION_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`An allocation with UUID ${uuid} already exists.`);
  }
}
/** A node that already has an instance (or allocation) cannot take another. */
export class NodeAssociated extends InvalidState {
  constructor(node: string, instance: string) {
    super(`Node ${node} is associated with instance ${instance}.`);
  }
}
export class InstanceAssociated extends ConflictError {
  readonly code = 'INSTANCE_ASSOCIATED';
  constructor(instance: string, node: string) {
    super(`Instance ${instance} is already associated with a node, it cannot be associated with this other node ${node}`);
  }
}
export class DeployTemplateNotFound extends NotFoundError {
  readonly code = 'DEPLOY_TEMPLATE_NOT_FOUND';
  constructor(ident: string) {
    super(`Deploy template ${ident} could not be found.`);
  }
}
export class DeployTemplateDuplicateName extends ConflictError {
  readonly code = 'DEPLOY_TEMPLATE_DUPLICATE_NAME';
  constructor(name: string) {
    super(`A deploy template with name ${name} already exists.`);
  }
}
export class DeployTemplateAlreadyExists extends ConflictError {
  readonly code = 'DEPLOY_TEMPLATE_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A deploy template with UUID ${uuid} already exists.`);
  }
}
/** Inspection read the hardware but could not find what a node needs (Ironic's HardwareInspectionFailure). */
export class HardwareInspectionFailure extends DriverError {
  readonly code = 'HARDWARE_INSPECTION_FAILURE';
}
/** A BIOS step the BMC refused or did not carry out (Ironic's RedfishError from the BIOS interface). */
export class BiosStepFailed extends DriverError {
  readonly code = 'BIOS_STEP_FAILED';
}
/** A firmware update the BMC refused, failed or could not be followed to its end; never retried: the image may be flashed. */
export class FirmwareUpdateFailed extends DriverError {
  readonly code = 'FIRMWARE_UPDATE_FAILED';
}
/**
 * The DHCP provider could not write a node's boot options (Ironic's FailedToUpdateDHCPOptions;
 * for dnsmasq, a host or option file that could not be written). Not retried: a directory that
 * cannot be written stays so until an operator acts.
 */
export class DhcpUpdateFailed extends DriverError {
  readonly code = 'FAILED_TO_UPDATE_DHCP_OPTIONS';
}
/** The DHCP provider could not withdraw a node's boot options (Ironic's FailedToCleanDHCPOpts). */
export class DhcpCleanFailed extends DriverError {
  readonly code = 'FAILED_TO_CLEAN_DHCP_OPTS';
}
/** A network boot's files (boot loader configurations, links by MAC) could not be written or read. */
export class BootFilesFailed extends DriverError {
  readonly code = 'BOOT_FILES_FAILED';
}
/** A virtual media operation the BMC cannot do (no suitable slot, no action, …). */
export class VirtualMediaUnavailable extends DriverError {
  readonly code = 'VIRTUAL_MEDIA_UNAVAILABLE';
}
/** Ironic's NodeProtected (403). */
export class NodeProtected extends GalvanicError {
  readonly code = 'NODE_PROTECTED';
  override readonly httpStatus: number = 403;
  constructor(node: string) {
    super(`Node ${node} is protected and cannot be undeployed, rebuilt or deleted`);
  }
}
/** Ironic's NodeInMaintenance (400). */
export class NodeInMaintenance extends BadRequestError {
  readonly code = 'NODE_IN_MAINTENANCE';
  constructor(op: string, node: string) {
    super(`The ${op} operation can't be performed on node ${node} because it's in maintenance mode.`);
  }
}
/**
 * Automated cleaning refused to a node in maintenance when `[conductor]
 * allow_provisioning_in_maintenance` is false (Ironic's do_node_clean): the cleaning fails with
 * this message as the node's last_error.
 */
export class CleaningInMaintenance extends ConflictError {
  readonly code = 'CLEANING_IN_MAINTENANCE';
  constructor() {
    super('Cleaning a node in maintenance mode is not allowed');
  }
}
/** Ironic's MalformedRequestURI: e.g. a volume connector addressed below a node. */
export class MalformedRequestURI extends BadRequestError {
  readonly code = 'MALFORMED_REQUEST_URI';
  constructor() {
    super('Malformed request URI.');
  }
}
export class VolumeConnectorNotFound extends NotFoundError {
  readonly code = 'VOLUME_CONNECTOR_NOT_FOUND';
  constructor(ident: string) {
    super(`Volume connector ${ident} could not be found.`);
  }
}
export class VolumeTargetNotFound extends NotFoundError {
  readonly code = 'VOLUME_TARGET_NOT_FOUND';
  constructor(ident: string) {
    super(`Volume target ${ident} could not be found.`);
  }
}
export class VolumeConnectorAlreadyExists extends ConflictError {
  readonly code = 'VOLUME_CONNECTOR_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A volume connector with UUID ${uuid} already exists.`);
  }
}
export class VolumeConnectorTypeAndIdAlreadyExists extends ConflictError {
  readonly code = 'VOLUME_CONNECTOR_TYPE_AND_ID_ALREADY_EXISTS';
  constructor(type: string, connectorId: string) {
    super(`A volume connector with type ${type} and connector ID ${connectorId} already exists.`);
  }
}
export class VolumeTargetAlreadyExists extends ConflictError {
  readonly code = 'VOLUME_TARGET_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A volume target with UUID ${uuid} already exists.`);
  }
}
export class VolumeTargetBootIndexAlreadyExists extends ConflictError {
  readonly code = 'VOLUME_TARGET_BOOT_INDEX_ALREADY_EXISTS';
  constructor(bootIndex: number) {
    super(`A volume target with boot index '${bootIndex}' for the same node already exists.`);
  }
}
/**
 * A node's (or hardware type's) RAID interface is `no-raid`. Ironic raises
 * UnsupportedDriverExtension and turns it into a 404 for RAID, "a standard interface that
 * not every driver has".
 */
export class RaidNotSupported extends NotFoundError {
  readonly code = 'RAID_NOT_SUPPORTED';
  constructor(driver: string) {
    super(`Driver ${driver} does not support raid (disabled or not implemented).`);
  }
}

/** Runbooks (API 1.92), with Ironic's messages. */
export class RunbookNotFound extends NotFoundError {
  readonly code = 'RUNBOOK_NOT_FOUND';
  constructor(ident: string) {
    super(`Runbook ${ident} could not be found.`);
  }
}
export class RunbookDuplicateName extends ConflictError {
  readonly code = 'RUNBOOK_DUPLICATE_NAME';
  constructor(name: string) {
    super(`A runbook with name ${name} already exists.`);
  }
}
export class RunbookAlreadyExists extends ConflictError {
  readonly code = 'RUNBOOK_ALREADY_EXISTS';
  constructor(uuid: string) {
    super(`A runbook with UUID ${uuid} already exists.`);
  }
}
/** Ironic's PowerStateFailure for a node whose disable_power_off forbids powering it off (API 1.95). */
export class PowerOffDisabled extends InvalidState {
  constructor(target: string) {
    super(`Failed to set node power state to ${target}.`);
  }
}

/** Ironic's IncompleteLookup: a lookup with neither a valid MAC address nor a node UUID. */
export class IncompleteLookup extends BadRequestError {
  readonly code = 'INCOMPLETE_LOOKUP';
  constructor() {
    super('At least one of \'addresses\' and \'node_uuid\' parameters is required');
  }
}

/** Failures talking to an agent (Ironic's AgentConnectionFailed, AgentAPIError, AgentInProgress). */
export abstract class AgentError extends DriverError {}
/** The agent could not be reached, after `[agent] max_command_attempts` tries. */
export class AgentConnectionFailed extends AgentError {
  readonly code = 'AGENT_CONNECTION_FAILED';
}
/** The agent answered with an error status or a body that is not IPA's. */
export class AgentAPIError extends AgentError {
  readonly code = 'AGENT_API_ERROR';
  constructor(message: string, readonly status?: number) {
    super(message);
  }
}
/** The agent is busy with an asynchronous command (its 409). */
export class AgentInProgress extends AgentError {
  readonly code = 'AGENT_IN_PROGRESS';
}
/** A command the conductor waits for was still running after `[agent] command_wait_attempts` reads. */
export class AgentCommandTimeout extends AgentError {
  readonly code = 'AGENT_COMMAND_TIMEOUT';
}
/** A step the agent ran failed, or its result is unusable. */
export class AgentStepFailed extends AgentError {
  readonly code = 'AGENT_STEP_FAILED';
}
/**
 * A deploy step failed and the deploy interface has cleaned up after it (Ironic's
 * deploying_error_handler with clean_up): the node's power is left as the failure left it.
 */
export class DeployStepCleanedUp extends AgentStepFailed {}

/** A RAID configuration the node's disks or its BMC cannot carry out (Ironic's RedfishError from the RAID interface). */
export class RaidConfigError extends DriverError {
  readonly code = 'RAID_CONFIG_ERROR';
  constructor(error: string) {
    super(`Redfish exception occurred. Error: ${error}`);
  }
}

/**
 * Ironic's ImageCreationFailed: a boot image (the agent's ISO, its EFI System Partition) or a
 * config drive could not be built. `toolOutput` is the end of what the failing tool printed on stderr, kept for the
 * log and the node's last_error.
 */
export class ImageCreationFailed extends DriverError {
  readonly code: string = 'IMAGE_CREATION_FAILED';
  constructor(imageType: string, error: string, readonly toolOutput?: string) {
    super(`Creating ${imageType} image failed: ${error}`);
  }
}
/** A program or file needed to build a boot image is not on this conductor; the message names its Debian package. */
export class ImageToolMissing extends ImageCreationFailed {
  override readonly code: string = 'IMAGE_TOOL_MISSING';
}
