import type { ConsoleCommand, ConsoleInterface } from '../interfaces.js';
import { parseIpmiDriverInfo, sessionArgs } from './driver-info.js';

/** Environment of an ipmitool child: C locale for parseable messages, the password for -E. */
function ipmitoolEnv(password: string): Record<string, string> {
  return { LC_ALL: 'C', IPMI_PASSWORD: password };
}

/**
 * `ipmitool-sol`: Serial-over-LAN through `ipmitool … sol activate`, one process per node
 * (the BMC allows one SOL payload at a time). Before a restart, `sol deactivate` frees the
 * payload a dead or kicked process may still hold.
 */
export class IpmitoolSolConsole implements ConsoleInterface {
  constructor(private readonly binary = 'ipmitool') {}

  validate(info: Readonly<Record<string, unknown>>): void {
    parseIpmiDriverInfo(info);
  }

  command(_nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): ConsoleCommand {
    const info = parseIpmiDriverInfo(driverInfo);
    // -R 1 -N 5: when the BMC is away, fail within seconds and let the restart backoff retry.
    return { command: this.binary, args: [...sessionArgs(info), '-R', '1', '-N', '5', '-E', 'sol', 'activate'], env: ipmitoolEnv(info.password) };
  }

  reset(driverInfo: Readonly<Record<string, unknown>>): ConsoleCommand {
    const info = parseIpmiDriverInfo(driverInfo);
    return { command: this.binary, args: [...sessionArgs(info), '-R', '1', '-N', '2', '-E', 'sol', 'deactivate'], env: ipmitoolEnv(info.password) };
  }
}
