import { BmcRejected, InvalidParameterValue } from '../../common/errors.js';
import type { BootDevice, BootDeviceOptions, DriverContext, ManagementInterface, SensorData } from '../interfaces.js';
import { parseIpmiDriverInfo } from './driver-info.js';
import { bootdevAccepted, parseBootDevice, parseSensorData } from './parse.js';
import { summarizeStderr } from './protocol.js';
import type { IpmitoolRunner } from './runner.js';

/** Ironic's boot devices for ipmitool, in its order; the names are also ipmitool's. */
export const IPMI_BOOT_DEVICES: readonly string[] = ['pxe', 'disk', 'cdrom', 'bios', 'safe'];

/** Tells the BMC not to drop boot flags after 60 s (IPMI spec; Ironic's ipmi_disable_boot_timeout). */
const DISABLE_BOOT_TIMEOUT = ['raw', '0x00', '0x08', '0x03', '0x08'];

export interface SetBootDeviceOptions extends BootDeviceOptions {
  /** Add `efiboot` to the options: boot the device in UEFI mode (as `bootMode: 'uefi'`). */
  efiboot?: boolean;
}

/** Boot device and sensors through ipmitool (Ironic's `ipmitool` management interface). */
export class IpmitoolManagement implements ManagementInterface {
  readonly staticBootDevices: readonly string[] = IPMI_BOOT_DEVICES;
  constructor(private readonly runner: IpmitoolRunner) {}

  /** @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    parseIpmiDriverInfo(driverInfo);
  }

  /**
   * `chassis bootparam get 5`; boot_device null when the selector is none of ours.
   * @throws InvalidDriverInfo | BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected
   */
  async getBootDevice(ctx: DriverContext): Promise<BootDevice> {
    const info = parseIpmiDriverInfo(ctx.driverInfo);
    const { stdout } = await this.runner.run(ctx, info, ['chassis', 'bootparam', 'get', '5']);
    return parseBootDevice(stdout);
  }

  /**
   * `chassis bootdev <device> [options=persistent[,efiboot]]`, after disabling the 60 s boot
   * flag timeout unless driver_info says otherwise.
   * @throws InvalidDriverInfo | InvalidParameterValue (unsupported device) | BmcRejected (the
   *   BMC refused; ipmitool still exits 0) | BmcTimeout | BmcUnreachable | BmcAuthFailed
   */
  async setBootDevice(ctx: DriverContext, device: string, persistent: boolean, options: SetBootDeviceOptions = {}): Promise<void> {
    if (!IPMI_BOOT_DEVICES.includes(device)) {
      throw new InvalidParameterValue(`Invalid boot device ${device} specified, valid boot devices are: ${IPMI_BOOT_DEVICES.join(', ')}.`);
    }
    const info = parseIpmiDriverInfo(ctx.driverInfo);
    if (info.disableBootTimeout) await this.runner.run(ctx, info, DISABLE_BOOT_TIMEOUT);
    const flags = [...(persistent ? ['persistent'] : []), ...(options.efiboot || options.bootMode === 'uefi' ? ['efiboot'] : [])];
    const command = ['chassis', 'bootdev', device, ...(flags.length ? [`options=${flags.join(',')}`] : [])];
    const { stdout, stderr } = await this.runner.run(ctx, info, command);
    if (!bootdevAccepted(stdout)) {
      throw new BmcRejected(`ipmitool ${command.join(' ')} on ${info.address}:${info.port}: the BMC refused: ${summarizeStderr(stderr) || stdout.trim() || 'no confirmation'}`);
    }
  }

  async getSupportedBootDevices(): Promise<string[]> {
    return [...IPMI_BOOT_DEVICES];
  }

  /**
   * `ipmitool sdr -v` in Ironic's sensor structure. This is the synchronous path of DESIGN.md
   * (a worker-pool process per read), hence no getSensorDataAsync.
   * @throws InvalidDriverInfo | BmcBadResponse (unparseable) | BmcTimeout | BmcUnreachable |
   *   BmcAuthFailed | BmcRejected
   */
  async getSensorData(ctx: DriverContext): Promise<SensorData> {
    const info = parseIpmiDriverInfo(ctx.driverInfo);
    const { stdout } = await this.runner.run(ctx, info, ['sdr', '-v'], [0, 1]);
    return parseSensorData(stdout);
  }
}
