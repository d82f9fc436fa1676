/**
 * The `idrac-redfish-virtual-media` boot interface (Ironic's DracRedfishVirtualMediaBoot): the
 * `redfish-virtual-media` interface, except how the node is set to boot its virtual CD. An
 * iDRAC before firmware 6 takes a `Cd` override for its physical optical drive; the virtual CD
 * is set through the Dell OEM ImportSystemConfiguration with a Server Configuration Profile
 * naming `VCD-DVD` (sushy-oem-idrac's set_virtual_boot_device). A pending configuration
 * (`LC068`) is applied by a power cycle, once, and a running job (`RAC0679`) waited out.
 * Every iDRAC is taken as able to do that, so no vendor check stands in the way.
 */
import { statusError, type RedfishCall } from '../redfish/client.js';
import { RedfishVirtualMediaBoot } from '../redfish/boot.js';
import type { Json } from '../redfish/odata.js';
import { drivePower } from '../redfish/power.js';
import { getSystem } from '../redfish/system.js';
import { RedfishError } from '../../common/errors.js';
import { followJob, idracMessageIds, oemManagerAction, onDellManager, waitWithin } from './oem.js';

/** sushy-oem-idrac's constants: a configuration is pending; a job is running. */
const CONFIG_PENDING = 'LC068';
const JOB_RUNNING = 'RAC0679';
/** sushy-oem-idrac tries 35 more times, 15 s apart, while the iDRAC is busy. */
const BUSY_RETRIES = 35;
const BUSY_RETRY_MS = 15_000;

/** The profile that boots the virtual CD, once or always (no whitespace between elements: the iDRAC's job fails on it). */
function virtualCdProfile(fqdd: string, persistent: boolean): string {
  return `<SystemConfiguration><Component FQDD="${fqdd}"><Attribute Name="ServerBoot.1#BootOnce">${persistent ? 'Disabled' : 'Enabled'}</Attribute>`
    + '<Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute></Component></SystemConfiguration>';
}

export class IdracRedfishVirtualMediaBoot extends RedfishVirtualMediaBoot {
  /** Ironic's DracRedfishVirtualMediaBoot._validate_vendor: people are assumed to do the right thing. */
  protected override async checkVendor(): Promise<void> {}

  /** @throws RedfishError | DriverError */
  protected override async setCdBoot(call: RedfishCall, nodeUuid: string, persistent: boolean): Promise<Json> {
    await onDellManager(call, nodeUuid, 'set virtual boot device', async (manager) => {
      const target = oemManagerAction(manager, 'ImportSystemConfiguration');
      if (!target) throw new RedfishError(`The manager ${manager.path} offers no #OemManager.ImportSystemConfiguration action`);
      const fqdd = typeof manager.body.Id === 'string' ? manager.body.Id : manager.path.slice(manager.path.lastIndexOf('/') + 1);
      const body = { ShareParameters: { Target: 'ALL' }, ImportBuffer: virtualCdProfile(fqdd, persistent) };
      const what = `Setting the boot device of ${call.info.origin} to the virtual CD through ${target}`;
      let rebooted = false;
      for (let left = BUSY_RETRIES; ; left--) {
        const r = await call.send('POST', target, { body });
        if (r.status < 400) {
          await followJob(call, r, what);
          call.log.info({ bmc: call.info.origin, persistent }, 'Set boot device to the virtual CD via the Dell OEM configuration import');
          return;
        }
        const ids = idracMessageIds(r);
        const pending = ids.some((id) => id.includes(CONFIG_PENDING));
        if (pending && !rebooted) {
          // As sushy-oem-idrac: the pending configuration is applied by turning the system off
          // and on again, which may consume a one-time boot set before.
          call.log.warn({ bmc: call.info.origin }, 'iDRAC has a configuration pending; power cycling the system to apply it');
          const until = Date.now() + this.powerWaitMs;
          await drivePower(call, 'power off', until);
          await drivePower(call, 'power on', until);
          rebooted = true;
          continue;
        }
        if ((pending || ids.some((id) => id.includes(JOB_RUNNING))) && left > 0 && (await waitWithin(call, BUSY_RETRY_MS, what))) continue;
        throw statusError(r, what);
      }
    });
    return (await getSystem(call)).body;
  }

  private get powerWaitMs(): number {
    return this.client.options.powerStateChangeTimeoutMs;
  }
}
