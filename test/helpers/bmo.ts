/**
 * Metal3's baremetal-operator (BMO) as an Ironic client: its Ironic provisioner
 * (`pkg/provisioner/ironic/`: ironic.go, register.go, inspecthardware.go, raid.go,
 * servicing.go) for a `redfish-virtualmedia` BMC, re-told request for request over gophercloud
 * (GopherClient). Each method is one reconcile of the provisioner and answers as BMO's do
 * (dirty: call again; an error message: the host fails); `reconcile` calls one until it is
 * done, as BMO's controller does, with its requeue delays shortened.
 */
import { expect } from 'chai';
import {
  BIOS_LIST, FIRMWARE_LIST, INVENTORY, NODE, PORT, STANDARD_PLUGIN_DATA, SUBSCRIPTION, VALIDATION, VMEDIA_LIST, goDecodeErrors,
} from './gophercloud.js';
import {
  BmoBase, CAPABILITIES, Updater, complete, continuing, driverInfoOf, failed, type HostData, type IronicNode, type Json, type Result,
} from './bmo-base.js';

export { METAL3_ENV, type BmoConfig, type HostData, type HostIdentity, type IronicNode, type Result } from './bmo-base.js';

const CUSTOM_DEPLOY_PRIORITY = 80;

/** One BareMetalHost's provisioner: each method is one of BMO's, one reconcile long. */
export class BmoHost extends BmoBase {
  /** findExistingHost: by UUID, then by name(s), then by the boot MAC's port. */
  private async findExistingHost(): Promise<IronicNode | null> {
    if (this.nodeId) {
      const res = await this.call({ method: 'GET', path: `nodes/${this.nodeId}`, decode: NODE });
      if (res.ok) return res.body as IronicNode;
      expect(res.status, res.text).to.equal(404);
    }
    for (const name of [`${this.host.namespace}~${this.host.name}`, this.host.name]) {
      const res = await this.call({ method: 'GET', path: `nodes/${encodeURIComponent(name)}`, decode: NODE });
      if (res.ok) return res.body as IronicNode;
      expect(res.status, res.text).to.equal(404);
    }
    if (this.host.bootMACAddress) {
      const found = await this.ports(`address=${encodeURIComponent(this.host.bootMACAddress)}&`);
      if (found.length > 0) return this.client.expectOk<IronicNode>({ method: 'GET', path: `nodes/${found[0].node_uuid}`, decode: NODE });
    }
    return null;
  }

  /** Register (register.go): find or enroll the node, its ports, then manage and configure it. */
  async register(data: HostData, opts: { credentialsChanged?: boolean } = {}): Promise<Result> {
    let node = await this.findExistingHost();
    const driverInfo = driverInfoOf(this.host);
    const updater = new Updater();
    if (!node) {
      const res = await this.call({
        method: 'POST', path: 'nodes', decode: NODE, body: {
          boot_interface: 'redfish-virtual-media', driver: 'redfish', driver_info: driverInfo, firmware_interface: 'redfish',
          ...(data.customDeploy ? { deploy_interface: 'custom-agent' } : data.image?.liveIso ? { deploy_interface: 'ramdisk' } : {}),
          inspect_interface: data.inspectionMode === 'fast' ? 'redfish' : 'agent', name: `${this.host.namespace}~${this.host.name}`,
          properties: { capabilities: CAPABILITIES[data.bootMode], cpu_arch: 'x86_64' }, raid_interface: 'redfish', disable_power_off: false,
        },
      });
      if (res.status === 409) return continuing();
      expect(res.ok, `create: ${res.status} ${res.text}`).to.equal(true);
      node = res.body as IronicNode;
      this.nodeId = node.uuid;
    } else {
      this.nodeId = node.uuid;
      updater.top('name', `${this.host.namespace}~${this.host.name}`, node);
      if (opts.credentialsChanged) updater.top('driver_info', driverInfo, node);
      updater.top('disable_power_off', false, node);
      updater.section(node.properties, { cpu_arch: 'x86_64' }, '/properties');
    }
    if (['enroll', 'manageable', 'available', 'active', 'adopt failed', 'inspect failed', 'clean failed', 'deploy failed', 'service failed', 'error'].includes(node.provision_state)) {
      await this.createPorts(node);
    }
    const updated = await this.tryUpdate(node, updater);
    if (!updated) return continuing();
    node = updated;
    switch (node.provision_state) {
      case 'enroll':
        if (node.last_error && !opts.credentialsChanged) return failed(node.last_error);
        if (node.target_provision_state === 'manageable') return continuing();
        return this.changeProvisionState(node, { target: 'manage' });
      case 'verifying':
        return continuing();
      case 'clean wait': case 'cleaning': case 'wait call-back': case 'deploying': case 'inspecting':
        return complete();
      default:
        return this.configureNode(node, data);
    }
  }

  /** createPortsForNode: the boot MAC's port, unless the node has it. */
  private async createPorts(node: IronicNode): Promise<void> {
    const mac = this.host.bootMACAddress;
    if (!mac) return;
    const existing = await this.ports(`node_uuid=${node.uuid}&`);
    if (existing.some((p) => p.address === mac)) return;
    const other = await this.ports(`address=${encodeURIComponent(mac)}&`);
    if (other.length > 0) {
      expect(other.every((p) => p.node_uuid === node.uuid), `MAC ${mac} belongs to another node`).to.equal(true);
      return;
    }
    await this.client.expectOk({ method: 'POST', path: 'ports', body: { address: mac, node_uuid: node.uuid, pxe_enabled: true }, decode: PORT });
  }

  /** configureNode: the agent's ISO, automated_clean, the boot mode capability and cpu_arch. */
  private async configureNode(node: IronicNode, data: HostData): Promise<Result> {
    const updater = new Updater()
      .section(node.driver_info, { deploy_kernel: null, deploy_ramdisk: null, deploy_iso: this.config.deployIsoUrl, kernel_append_params: null }, '/driver_info')
      .top('automated_clean', data.automatedCleaning, node)
      .section(node.properties, { capabilities: this.capabilities(node, data), cpu_arch: 'x86_64' }, '/properties');
    return (await this.tryUpdate(node, updater)) ? complete() : continuing();
  }

  /**
   * InspectHardware (inspecthardware.go); the hardware details come back with a complete result.
   * `forceReboot` (a new preprovisioning image) aborts an inspection waiting for its agent.
   */
  async inspectHardware(data: HostData, refresh = false, forceReboot = false): Promise<Result & { inventory?: Json; started?: boolean }> {
    const node = await this.getNode();
    // An inspection BMO aborted itself is restarted, not reported.
    const aborted = node.provision_state === 'inspect failed' && (node.last_error ?? '').includes('aborted');
    switch (node.provision_state) {
      case 'available':
        return this.changeProvisionState(node, { target: 'manage' });
      case 'inspect wait':
        if (forceReboot) return { ...(await this.changeProvisionState(node, { target: 'abort' })), started: true };
        return continuing();
      case 'inspecting':
        return continuing();
      case 'inspect failed':
        if (!aborted) return failed(node.last_error || 'Inspection failed');
        return { ...(await this.startInspection(node, data)), started: true };
      case 'manageable':
        if (refresh) return { ...(await this.startInspection(node, data)), started: true };
        break;
      default:
        throw new Error(`unexpected provision state ${node.provision_state}`);
    }
    const res = await this.call({ method: 'GET', path: `nodes/${node.uuid}/inventory`, decode: INVENTORY });
    if (res.status === 404) return this.startInspection(node, data);
    expect(res.ok, `inventory: ${res.status} ${res.text}`).to.equal(true);
    // GetHardwareDetails reads plugin_data as the standard plugin data (a failure loses NIC details).
    const pluginErrors = goDecodeErrors((res.body as Json).plugin_data, STANDARD_PLUGIN_DATA, '$.plugin_data');
    expect(pluginErrors, pluginErrors.join('\n')).to.deep.equal([]);
    return { ...complete(), inventory: res.body as Json };
  }

  private async startInspection(node: IronicNode, data: HostData): Promise<Result> {
    const updater = new Updater()
      .section(node.properties, { capabilities: this.capabilities(node, data), cpu_arch: 'x86_64' }, '/properties')
      .top('inspect_interface', data.inspectionMode === 'fast' ? 'redfish' : 'agent', node);
    const updated = await this.tryUpdate(node, updater);
    if (!updated) return continuing();
    return this.changeProvisionState(updated, { target: 'inspect' });
  }

  /** GetFirmwareSettings: GET bios, with the registry's schema when asked (detail, 1.74). */
  async firmwareSettings(includeSchema: boolean): Promise<Array<Json & { name: string; value: string | null }>> {
    const body = await this.client.expectOk<{ bios: Array<Json & { name: string; value: string | null }> }>({
      method: 'GET', path: `nodes/${this.nodeId}/bios${includeSchema ? '?detail=true' : ''}`, decode: BIOS_LIST,
    });
    return body.bios;
  }

  /** GetFirmwareComponents: GET firmware, keeping bios, bmc and nic:* as BMO does. */
  async firmwareComponents(): Promise<Array<Json & { component: string; current_version: string | null }>> {
    const body = await this.client.expectOk<{ firmware: Array<Json & { component: string; current_version: string | null }> }>({
      method: 'GET', path: `nodes/${this.nodeId}/firmware`, decode: FIRMWARE_LIST,
    });
    return body.firmware.filter((c) => c.component === 'bios' || c.component === 'bmc' || c.component.startsWith('nic:'));
  }

  /**
   * The BIOS and firmware steps both manual cleaning and servicing get: apply_configuration with
   * the settings whose value differs (getNewFirmwareSettings), update with every firmware update.
   */
  private firmwareSteps(actual: Record<string, string | null>, data: HostData): Json[] {
    const steps: Json[] = [];
    const bios = Object.entries(data.biosSettings ?? {}).filter(([k, v]) => actual[k] !== String(v)).map(([name, value]) => ({ name, value }));
    if (bios.length > 0) steps.push({ interface: 'bios', step: 'apply_configuration', args: { settings: bios } });
    const fw = (data.firmwareUpdates ?? []).map((u) => ({ component: u.component, url: u.url }));
    if (fw.length > 0) steps.push({ interface: 'firmware', step: 'update', args: { settings: fw } });
    return steps;
  }

  /** Prepare (ironic.go, raid.go): the manual cleaning that applies RAID, BIOS settings and firmware. */
  async prepare(data: HostData, actualBios: Record<string, string | null>, unprepared: boolean): Promise<Result & { started?: boolean }> {
    const node = await this.getNode();
    switch (node.provision_state) {
      case 'manageable': {
        if (!unprepared) return complete();
        const disks = (data.raidVolumes ?? []).map((v, i) => ({
          size_gb: v.sizeGibibytes ?? 'MAX', raid_level: v.level, ...(v.name ? { volume_name: v.name } : {}), ...(i === 0 ? { is_root_volume: true } : {}),
        }));
        if (disks.length > 0) {
          // setTargetRAIDCfg: the RAID interface (already redfish), then the target.
          const updated = await this.tryUpdate(node, new Updater().top('raid_interface', 'redfish', node));
          if (!updated) return continuing();
          const res = await this.call({ method: 'PUT', path: `nodes/${node.uuid}/states/raid`, body: { logical_disks: disks }, ok: [204] });
          expect(res.ok, `raid: ${res.status} ${res.text}`).to.equal(true);
        }
        const raid = disks.length > 0 ? [{ interface: 'raid', step: 'delete_configuration' }, { interface: 'raid', step: 'create_configuration' }] : [];
        const steps = [...raid, ...this.firmwareSteps(actualBios, data)];
        if (steps.length === 0) return { ...complete(), started: true };
        return { ...(await this.changeProvisionState(node, { target: 'clean', clean_steps: steps })), started: true };
      }
      case 'clean failed':
        return failed(node.last_error ?? '');
      case 'cleaning': case 'clean wait':
        return continuing();
      default:
        throw new Error(`have unexpected ironic node state ${node.provision_state}`);
    }
  }

  /** getInstanceUpdateOpts: instance_uuid, instance_info and the deploy interface for the image. */
  private instanceUpdates(node: IronicNode, data: HostData): Updater {
    const u = new Updater().top('instance_uuid', this.host.uid, node)
      .section(node.instance_info, { capabilities: {}, root_device: {} }, '/instance_info');
    const image = data.image;
    if (data.customDeploy) {
      u.section(node.instance_info, image
        ? { boot_iso: null, image_checksum: null, image_source: image.url, image_os_hash_algo: image.checksumType ?? null, image_os_hash_value: image.checksum ?? null, image_disk_format: image.diskFormat ?? null, image_pull_secret: null }
        : { boot_iso: null, image_checksum: null, image_source: null, image_os_hash_algo: null, image_os_hash_value: null, image_disk_format: null, image_pull_secret: null }, '/instance_info');
      u.top('deploy_interface', 'custom-agent', node);
    } else if (image?.liveIso) {
      u.section(node.instance_info, { boot_iso: image.url, image_source: null, image_os_hash_value: null, image_os_hash_algo: null, image_checksum: null }, '/instance_info');
      u.top('deploy_interface', 'ramdisk', node);
      u.section(node.driver_info, { force_persistent_boot_device: 'Default' }, '/driver_info');
    } else if (image) {
      const hash = image.checksumType
        ? { image_checksum: null, image_os_hash_algo: image.checksumType, image_os_hash_value: image.checksum }
        : { image_checksum: image.checksum, image_os_hash_algo: null, image_os_hash_value: null };
      u.section(node.instance_info, { boot_iso: null, image_source: image.url, image_disk_format: image.diskFormat ?? null, image_pull_secret: null, ...hash }, '/instance_info');
      if (node.deploy_interface === 'ramdisk' || node.deploy_interface === 'custom-agent') u.top('deploy_interface', null, node);
      u.section(node.driver_info, { force_persistent_boot_device: 'Default' }, '/driver_info');
    }
    return u;
  }

  /** getConfigDrive: none for a live ISO; else user data, network data and BMO's meta data. */
  private configDrive(data: HostData): Json {
    if (data.image?.liveIso) return {};
    const name = this.host.name;
    return {
      meta_data: { uuid: this.host.uid, 'metal3-namespace': this.host.namespace, 'metal3-name': name, 'local-hostname': name, local_hostname: name, name },
      ...(data.networkData ? { network_data: data.networkData } : {}),
      ...(data.userData ? { user_data: data.userData } : {}),
    };
  }

  /** Provision (ironic.go); `forceReboot` undeploys a node that waits for its agent. */
  async provision(data: HostData, forceReboot = false): Promise<Result> {
    const node = await this.getNode();
    switch (node.provision_state) {
      case 'wait call-back':
        // A new preprovisioning image: the deploy waiting for the old one's agent is undone.
        if (forceReboot) return this.changeProvisionState(node, { target: 'deleted' });
        return continuing();
      case 'deploy failed':
        return failed(`Image provisioning failed: ${node.last_error ?? ''}`);
      case 'manageable':
        return this.changeProvisionState(node, { target: 'provide' });
      case 'clean failed':
        if (node.maintenance) return this.setMaintenance(node, false);
        return this.changeProvisionState(node, { target: 'manage' });
      case 'available': {
        const updated = await this.tryUpdate(node, this.instanceUpdates(node, data));
        if (!updated) return continuing();
        const validation = await this.client.expectOk<Record<string, { result: boolean | null; reason: string | null }>>({ method: 'GET', path: `nodes/${node.uuid}/validate`, decode: VALIDATION });
        const errors = ['boot', 'deploy'].filter((k) => !validation[k].result).map((k) => validation[k].reason);
        if (errors.length > 0) return failed(`host validation error: ${errors.join('; ')}`);
        const steps = data.customDeploy ? [{ interface: 'deploy', step: data.customDeploy, args: {}, priority: CUSTOM_DEPLOY_PRIORITY }] : [];
        return this.changeProvisionState(updated, { target: 'active', configdrive: this.configDrive(data), ...(steps.length ? { deploy_steps: steps } : {}) });
      }
      case 'active':
        return complete();
      default:
        return continuing();
    }
  }

  /** PowerOn. */
  async powerOn(): Promise<Result> {
    const node = await this.getNode();
    if (node.power_state === 'power on') return complete();
    if (node.target_power_state === 'power on') return continuing();
    if (node.last_error) return failed(`PowerOn operation failed: ${node.last_error}`);
    return this.changePower(node, 'power on');
  }

  /** PowerOff (soft first unless forced), for a node that waits in no inspection or cleaning. */
  async powerOff(soft: boolean): Promise<Result> {
    const node = await this.getNode();
    if (node.power_state === 'power off') return complete();
    if (node.target_power_state === 'power off' || node.target_power_state === 'soft power off') return continuing();
    if (!node.target_power_state && node.last_error && !node.last_error.includes('aborted')) return failed(node.last_error);
    if (soft) return this.changePower(node, node.disable_power_off ? 'soft rebooting' : 'soft power off');
    return this.changePower(node, node.disable_power_off ? 'rebooting' : 'power off');
  }

  /** Service (servicing.go): BIOS settings and firmware updates on an active node. */
  async service(data: HostData, actualBios: Record<string, string | null>, unprepared: boolean): Promise<Result & { started?: boolean }> {
    const node = await this.getNode();
    switch (node.provision_state) {
      case 'service failed':
        return failed(node.last_error ?? '');
      case 'active': {
        if (!unprepared) return complete();
        const steps = this.firmwareSteps(actualBios, data);
        if (steps.length === 0) return { ...complete(), started: true };
        return { ...(await this.changeProvisionState(node, { target: 'service', service_steps: steps })), started: true };
      }
      case 'servicing': case 'service wait':
        return continuing();
      default:
        throw new Error(`have unexpected ironic node state ${node.provision_state}`);
    }
  }

  /** Deprovision. */
  async deprovision(automatedCleaning: boolean): Promise<Result> {
    const node = await this.getNode();
    switch (node.provision_state) {
      case 'error': case 'clean failed':
        return failed(node.last_error ?? 'Deprovisioning failed');
      case 'manageable':
        return this.changeProvisionState(node, { target: 'provide' });
      case 'available':
        return complete();
      case 'deleting': case 'cleaning': case 'clean wait': case 'deploying':
        return continuing();
      case 'active': case 'deploy failed': case 'wait call-back': {
        if (node.automated_clean !== automatedCleaning) {
          await this.client.expectOk({ method: 'PATCH', path: `nodes/${node.uuid}`, body: new Updater().top('automated_clean', automatedCleaning, node).ops, ok: [200], decode: NODE });
          return continuing();
        }
        return this.changeProvisionState(node, { target: 'deleted' });
      }
      default:
        throw new Error(`unhandled ironic state ${node.provision_state}`);
    }
  }

  /** Adopt (externally provisioned hosts, and hosts re-registered after Ironic lost its database). */
  async adopt(restartOnFailure: boolean): Promise<Result> {
    const node = await this.getNode();
    switch (node.provision_state) {
      case 'enroll': case 'verifying':
        throw new Error(`invalid state for adopt: ${node.provision_state}`);
      case 'manageable':
        return this.changeProvisionState(node, { target: 'adopt' });
      case 'adopting':
        return continuing();
      case 'adopt failed':
        if (restartOnFailure) return this.changeProvisionState(node, { target: 'adopt' });
        return failed(`Host adoption failed: ${node.last_error ?? ''}`);
      case 'active':
        if (node.maintenance && !node.fault) return this.setMaintenance(node, false);
        return complete();
      default:
        return complete();
    }
  }

  /** Delete (realDelete): stale instance UUID removed, maintenance where Ironic needs it, then DELETE. */
  async delete(): Promise<Result> {
    const res = await this.call({ method: 'GET', path: `nodes/${this.nodeId}`, decode: NODE });
    if (res.status === 404) return complete();
    expect(res.ok, res.text).to.equal(true);
    const node = res.body as IronicNode;
    switch (node.provision_state) {
      case 'verifying': case 'deploying': case 'cleaning': case 'inspecting': case 'servicing': case 'deleting':
        return continuing();
      case 'enroll':
        break;
      case 'available': case 'manageable':
        if (node.instance_uuid) {
          if (!(await this.tryUpdate(node, new Updater().top('instance_uuid', null, node)))) return continuing();
        }
        break;
      case 'inspect wait': case 'clean wait': case 'service wait': case 'wait call-back':
        return continuing();
      default:
        if (!node.maintenance) return this.setMaintenance(node, true, 'forcing deletion in baremetal-operator');
    }
    const del = await this.call({ method: 'DELETE', path: `nodes/${node.uuid}` });
    if (del.status === 409) return continuing();
    if (del.status !== 404) expect(del.ok, `delete: ${del.status} ${del.text}`).to.equal(true);
    return continuing();
  }

  /** AddBMCEventSubscriptionForNode: the new subscription's Id. */
  async addSubscription(destination: string, context: string, headers: Array<Record<string, string>>): Promise<string> {
    const sub = await this.client.expectOk<{ Id: string }>({
      method: 'POST', path: `nodes/${this.nodeId}/vendor_passthru?method=create_subscription`, ok: [200], decode: SUBSCRIPTION,
      body: { Destination: destination, HttpHeaders: headers, Context: context },
    });
    return sub.Id;
  }

  /** RemoveBMCEventSubscriptionForNode. */
  async removeSubscription(id: string): Promise<void> {
    await this.client.expectOk({ method: 'DELETE', path: `nodes/${this.nodeId}/vendor_passthru?method=delete_subscription`, body: { id }, ok: [200, 202, 204] });
  }

  /** AttachDataImage / DetachDataImage / GetDataImageStatus (virtual media API, 1.89 and 1.93). */
  async attachDataImage(url: string): Promise<void> {
    await this.client.expectOk({ method: 'POST', path: `nodes/${this.nodeId}/vmedia`, body: { device_type: 'cdrom', image_url: url }, ok: [204] });
  }

  async detachDataImage(): Promise<void> {
    await this.client.expectOk({ method: 'DELETE', path: `nodes/${this.nodeId}/vmedia?device_types=cdrom`, ok: [204] });
  }

  async dataImageAttached(): Promise<boolean | 'busy'> {
    const node = await this.getNode();
    if (node.reservation) return 'busy';
    const list = await this.client.expectOk<Array<{ inserted: boolean }>>({ method: 'GET', path: `nodes/${this.nodeId}/vmedia`, decode: VMEDIA_LIST });
    return list.some((m) => m.inserted);
  }


}
