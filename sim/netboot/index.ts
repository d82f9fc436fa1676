/** A machine that boots from the network (DHCP, TFTP, iPXE, PXELINUX, GRUB) into the simulated agent. */
export { NetbootHost, type BootRecord, type NetbootHostOptions, type NetbootNetwork } from './host.js';
export { netbootFacts } from './facts.js';
export { dnsmasqOffer, type DhcpOffer } from './dnsmasq.js';
