/** The IPMI driver's pure parts: output parsers, stderr classification, argv, command spacing. */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { BmcBadResponse } from '../../common/errors.js';
import { parseIpmiDriverInfo } from '../../drivers/ipmi/driver-info.js';
import { bootdevAccepted, parseBootDevice, parsePowerStatus, parseSensorData } from '../../drivers/ipmi/parse.js';
import { classifyFailure, summarizeStderr } from '../../drivers/ipmi/protocol.js';
import { IpmitoolRunner } from '../../drivers/ipmi/runner.js';
import { CommandSpacing } from '../../drivers/ipmi/spacing.js';

// Shaped like real BMCs' `ipmitool sdr -v` (Ironic's unit tests use the same kinds of record).
const SDR = `Sensor ID              : Temp (0x1)
 Entity ID             : 3.1 (Processor)
 Sensor Type (Analog)  : Temperature
 Sensor Reading        : -58 (+/- 1) degrees C
 Status                : ok
 Upper critical        : 90.000
 Positive Hysteresis   : 1.000

Sensor ID              : Fan4A RPM (0x36)
 Entity ID             : 7.1 (System Board)
 Sensor Type (Threshold)  : Fan (0x04)
 Sensor Reading        : 4200 (+/- 0) RPM
 Status                : ok
 Lower critical        : 1080.000

Sensor ID              : Fan5B RPM (0x39)
 Entity ID             : 7.1 (System Board)
 Sensor Type (Threshold)  : Fan (0x04)
 Status                : Not Available

Sensor ID              : Intrusion (0x73)
 Entity ID             : 7.1 (System Board)
 Sensor Type (Discrete): Physical Security (0x05)
 Sensor Reading        : 0h
 Event Time            : 12:34:56
 States Asserted       : Physical Security
                         [General Chassis intrusion]
`;

const BOOTPARAM = (selector: string, apply: string) => `Boot parameter version: 1
Boot parameter 5 is valid/unlocked
Boot parameter data: c008000000
 Boot Flags :
   - Boot Flag Valid
   - ${apply}
   - BIOS EFI boot
   - Boot Device Selector : ${selector}
   - Console Redirection control : System Default
`;

describe('ipmi driver: parsing', () => {
  it('groups sdr -v records by sensor type and Sensor ID, as Ironic does', () => {
    const data = parseSensorData(SDR);
    expect(data).to.have.all.keys('Temperature', 'Fan', 'Physical');
    expect(data.Temperature['Temp (0x1)']).to.deep.equal({
      'Sensor ID': 'Temp (0x1)',
      'Entity ID': '3.1 (Processor)',
      'Sensor Type (Analog)': 'Temperature',
      'Sensor Reading': '-58 (+/- 1) degrees C',
      Status: 'ok',
      'Upper critical': '90.000',
      'Positive Hysteresis': '1.000',
    });
    // No reading: dropped. Lines with several colons (times) and continuation lines: skipped.
    expect(data.Fan).to.have.all.keys('Fan4A RPM (0x36)');
    expect(data.Physical['Intrusion (0x73)']).to.not.have.any.keys('Event Time', '[General Chassis intrusion]');
    expect(data.Physical['Intrusion (0x73)']['States Asserted']).to.equal('Physical Security');
  });

  it('returns nothing for empty output and fails on output without any reading or type', () => {
    expect(parseSensorData('')).to.deep.equal({});
    expect(() => parseSensorData('Sensor ID : X (0x1)\n Sensor Type (Threshold) : Fan\n')).to.throw(BmcBadResponse, /get nothing/);
    expect(() => parseSensorData('Sensor ID : X (0x1)\n Sensor Reading : 1\n')).to.throw(BmcBadResponse, /unknown sensor type/);
  });

  it('reads the boot device and its persistence from bootparam 5', () => {
    expect(parseBootDevice(BOOTPARAM('Force PXE', 'Options apply to all future boots'))).to.deep.equal({ bootDevice: 'pxe', persistent: true });
    expect(parseBootDevice(BOOTPARAM('Force Boot from default Hard-Drive', 'Options apply to only next boot'))).to.deep.equal({ bootDevice: 'disk', persistent: false });
    expect(parseBootDevice(BOOTPARAM('Force Boot from default Hard-Drive, request Safe-Mode', 'Options apply to only next boot')).bootDevice).to.equal('safe');
    expect(parseBootDevice(BOOTPARAM('Force Boot into BIOS Setup', 'Options apply to only next boot')).bootDevice).to.equal('bios');
    expect(parseBootDevice(BOOTPARAM('Force Boot from CD/DVD', 'Options apply to only next boot')).bootDevice).to.equal('cdrom');
    expect(parseBootDevice(BOOTPARAM('No override', 'Options apply to only next boot')).bootDevice).to.equal(null);
  });

  it('reads power status and bootdev confirmations', () => {
    expect(parsePowerStatus('Chassis Power is on\n')).to.equal('power on');
    expect(parsePowerStatus('Chassis Power is off\n')).to.equal('power off');
    expect(parsePowerStatus('Chassis Power is unknown\n')).to.equal('error');
    expect(bootdevAccepted('Set Boot Device to pxe\n')).to.equal(true);
    expect(bootdevAccepted('')).to.equal(false);
  });

  it('classifies ipmitool -v failures', () => {
    const lanplus = 'Error: Unable to establish IPMI v2 / RMCP+ session\n';
    expect(classifyFailure(`Loading IANA PEN Registry...\n> RAKP 2 HMAC is invalid\n${lanplus}`).code).to.equal('BMC_AUTH_FAILED');
    expect(classifyFailure(`RAKP 2 message indicates an error : unauthorized name\n${lanplus}`).code).to.equal('BMC_AUTH_FAILED');
    expect(classifyFailure('Activate Session command failed\nError: Unable to establish LAN session\n').code).to.equal('BMC_AUTH_FAILED');
    expect(classifyFailure('Set Chassis Power Control to Up/On failed: Insufficient privilege level\n').code).to.equal('BMC_AUTH_FAILED');
    expect(classifyFailure(`Get Auth Capabilities error\nError issuing Get Channel Authentication Capabilities request\n${lanplus}`).code).to.equal('BMC_UNREACHABLE');
    expect(classifyFailure('Address lookup for bmc.invalid failed\nCould not open socket!\n').code).to.equal('BMC_UNREACHABLE');
    expect(classifyFailure(`Error in open session response message : invalid authentication algorithm\n${lanplus}`).code).to.equal('BMC_REJECTED');
    expect(classifyFailure('Set Chassis Power Control to Diag failed: Invalid data field in request\n')).to.deep.equal({ code: 'BMC_REJECTED', retryable: false });
    expect(classifyFailure('Error in open session response message : insufficient resources for session\n')).to.deep.equal({ code: 'BMC_UNREACHABLE', retryable: true });
    expect(classifyFailure('Get Device ID command failed: Node busy\n')).to.deep.equal({ code: 'BMC_REJECTED', retryable: true });
    expect(summarizeStderr('Loading IANA PEN Registry...\nRunning Get VSO Capabilities my_addr 0x20\n> RAKP 2 HMAC is invalid\n')).to.equal('> RAKP 2 HMAC is invalid');
  });
});

describe('ipmi driver: ipmitool arguments', () => {
  const runner = new IpmitoolRunner({ workers: 1, commandTimeoutMs: 1000, minCommandIntervalMs: 1000, commandRetryTimeoutMs: 60_000, useIpmitoolRetries: false });
  after(() => runner.close());

  it('takes the password from the environment, never argv, with exactly one -v', () => {
    const info = parseIpmiDriverInfo({ ipmi_address: '10.0.0.9', ipmi_username: 'root', ipmi_password: 's3cr3t-pw', ipmi_cipher_suite: '17' });
    const args = runner.buildArgs(info, ['power', 'status']);
    expect(args).to.deep.equal(['-I', 'lanplus', '-H', '10.0.0.9', '-p', '623', '-U', 'root', '-L', 'ADMINISTRATOR', '-C', '17', '-R', '1', '-N', '1', '-E', '-v', 'power', 'status']);
    expect(args.join(' ')).to.not.contain('s3cr3t-pw');
    expect(runner.buildArgs(info, ['sdr', '-v']).filter((a) => a === '-v')).to.have.length(1);
  });

  it('uses -I lan for IPMI 1.5 and lets ipmitool retry when told to', () => {
    const info = parseIpmiDriverInfo({ ipmi_address: 'bmc', ipmi_protocol_version: '1.5', ipmi_priv_level: 'operator' });
    const retrying = new IpmitoolRunner({ workers: 1, commandTimeoutMs: 1000, minCommandIntervalMs: 5000, commandRetryTimeoutMs: 60_000, useIpmitoolRetries: true });
    expect(retrying.buildArgs(info, ['power', 'on'])).to.deep.equal(['-I', 'lan', '-H', 'bmc', '-p', '623', '-L', 'OPERATOR', '-R', '12', '-N', '5', '-E', '-v', 'power', 'on']);
  });
});

describe('ipmi driver: command spacing', () => {
  it('spaces commands to one BMC and runs other BMCs at once', async () => {
    const spacing = new CommandSpacing(100);
    const t0 = performance.now();
    const stamp = (key: string) => spacing.run(key, async () => performance.now() - t0);
    const [a1, a2, a3, b1] = await Promise.all([stamp('a'), stamp('a'), stamp('a'), stamp('b')]);
    expect(a2 - a1).to.be.at.least(95);
    expect(a3 - a2).to.be.at.least(95);
    expect(b1).to.be.below(90);
  });

  it('lets a waiter give up without letting the next one jump the queue', async () => {
    const spacing = new CommandSpacing(0);
    const order: string[] = [];
    let finishFirst!: () => void;
    const first = spacing.run('k', () => new Promise<void>((r) => (finishFirst = () => { order.push('first'); r(); })));
    const ac = new AbortController();
    const second = spacing.run('k', async () => order.push('second'), ac.signal).catch((e: Error) => order.push(`second: ${e.message}`));
    const third = spacing.run('k', async () => order.push('third'));
    ac.abort(new Error('gave up'));
    await sleep(20);
    expect(order).to.deep.equal(['second: gave up']);
    finishFirst();
    await Promise.all([first, second, third]);
    expect(order).to.deep.equal(['second: gave up', 'first', 'third']);
  });
});
