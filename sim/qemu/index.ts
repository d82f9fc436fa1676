/** QEMU-backed hosts for the Redfish simulator (docs/vm-lab.md). */
export { QemuHosts, fetchImage, type QemuOptions } from './hosts.js';
export { probeKvm, type KvmProbe } from './accel.js';
export { Qmp, QmpError } from './qmp.js';
