/**
 * What an Ironic conductor writes for a network-booting node, written out by hand from Ironic's
 * code (ironic/common/pxe_utils.py, ironic/dhcp/dnsmasq.py, deploy_utils.switch_pxe_config) and
 * its default templates as Jinja2 renders them (ipxe_config.template, boot.ipxe,
 * pxe_config.template, pxe_grub_config.template): the tests compare Galvanic's files with these,
 * file by file. Independent of Galvanic's template engine on purpose.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

/** A file tree: each file's content, each link as `-> target`, each directory as `/`. */
export type Tree = Record<string, string>;

/** Reads `dir` into a Tree, paths relative to it; dot-files (temporaries) are listed too, so that leftovers show. */
export async function readTree(dir: string): Promise<Tree> {
  const out: Tree = {};
  async function walk(rel: string): Promise<void> {
    const names = await fs.readdir(path.join(dir, rel)).catch(() => [] as string[]);
    for (const name of names.sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = await fs.lstat(path.join(dir, r));
      if (st.isSymbolicLink()) out[r] = `-> ${await fs.readlink(path.join(dir, r))}`;
      else if (st.isDirectory()) {
        out[`${r}/`] = '/';
        await walk(r);
      } else out[r] = await fs.readFile(path.join(dir, r), 'utf8');
    }
  }
  await walk('');
  return out;
}

/** pxe_options of a deploy (agent) configuration, for iPXE (URLs) or PXELINUX/GRUB (TFTP paths). */
export interface IronicDeployOptions {
  kernel: string;
  ramdisk: string;
  appendParams: string;
  tftpServer: string;
  ipxeTimeoutMs?: number;
  bootIsoUrl?: string;
}

function timeout(ms?: number): string {
  return ms && ms > 0 ? `--timeout ${ms} ` : '';
}

/** ipxe_config.template rendered, with `goto <target>` lines as switch_pxe_config leaves them. */
export function ironicIpxeConfig(o: {
  deployKernel: string; deployRamdisk: string; akiPath: string; ariPath: string; appendParams: string; ramdiskOpts?: string;
  bootIsoUrl?: string; ipxeTimeoutMs?: number; target?: string;
}): string {
  const t = timeout(o.ipxeTimeoutMs);
  const ramdiskBoot = o.bootIsoUrl
    ? `:boot_ramdisk\nimgfree\nsanboot ${o.bootIsoUrl}\n`
    : `:boot_ramdisk\nimgfree\nkernel ${t}${o.akiPath} root=/dev/ram0 text ${o.appendParams} ${o.ramdiskOpts ?? ''} initrd=ramdisk || goto boot_ramdisk\ninitrd ${t}${o.ariPath} || goto boot_ramdisk\nboot\n`;
  const text = `#!ipxe

set attempts:int32 10
set i:int32 0

goto deploy

:deploy
imgfree
kernel ${t}${o.deployKernel} selinux=0 troubleshoot=0 text ${o.appendParams} BOOTIF=\${mac} initrd=deploy_ramdisk || goto retry

initrd ${t}${o.deployRamdisk} || goto retry
boot

:retry
iseq \${i} \${attempts} && goto fail ||
inc i
echo No response, retrying in \${i} seconds.
sleep \${i}
goto deploy

:fail
echo Failed to get a response after \${attempts} attempts
echo Powering off in 30 seconds.
sleep 30
poweroff

:boot_anaconda
imgfree
kernel ${t}${o.akiPath} text ${o.appendParams} inst.ks= inst.stage2= initrd=ramdisk || goto boot_anaconda
initrd ${t}${o.ariPath} || goto boot_anaconda
boot

${ramdiskBoot}
:boot_whole_disk
sanboot --no-describe || exit 0`;
  return o.target ? text.replace(/^goto .*$/gm, `goto ${o.target}`) : text;
}

/** boot.ipxe rendered with ipxe_for_mac_uri `pxelinux.cfg/`. */
export function ironicBootIpxe(fallback?: string): string {
  const fb = (label: string) => (fallback ? `chain ${fallback} | goto ${label}\n\n:${label}\n` : '');
  return `#!ipxe

# NOTE(lucasagomes): Loop over all network devices and boot from
# the first one capable of booting. For more information see:
# https://bugs.launchpad.net/ironic/+bug/1504482
set netid:int32 -1
:loop
inc netid || chain pxelinux.cfg/\${mac:hexhyp} || goto old_rom
isset \${net\${netid}/mac} || goto loop_done
echo Attempting to boot from MAC \${net\${netid}/mac:hexhyp}
chain pxelinux.cfg/\${net\${netid}/mac:hexhyp} || goto loop

# If we've got here the chained config returned success
# suggesting "sanboot" in boot_whole_disk failed (some UEFI cases)
# exit 0 so the bios continues to the next device
echo Exiting pxe config to allow boot to continue on next device
exit 0

:loop_done
${fb('boot_failed')}echo PXE boot failed! No configuration found for any of the present NICs.
echo Press any key to reboot...
prompt --timeout 180
reboot

:old_rom
${fb('boot_failed_old_rom')}echo PXE boot failed! No configuration found for NIC \${mac:hexhyp}.
echo Please update your iPXE ROM and retry.
echo Press any key to reboot...
prompt --timeout 180
reboot`;
}

/** pxe_config.template (PXELINUX, BIOS) rendered. */
export function ironicPxelinuxConfig(o: { deployKernel: string; deployRamdisk: string; akiPath: string; ariPath: string; appendParams: string; ramdiskOpts?: string; target?: string }): string {
  const text = `default deploy

label deploy
kernel ${o.deployKernel}
append initrd=${o.deployRamdisk} selinux=0 troubleshoot=0 text ${o.appendParams}
ipappend 2

label boot_whole_disk
COM32 chain.c32
append mbr:{{ DISK_IDENTIFIER }}

label boot_ramdisk
kernel ${o.akiPath}
append initrd=${o.ariPath} root=/dev/ram0 text ${o.appendParams} ${o.ramdiskOpts ?? ''}

label boot_anaconda
kernel ${o.akiPath}
append initrd=${o.ariPath} text ${o.appendParams} inst.ks= inst.stage2=
ipappend 2`;
  return o.target ? text.replace(/^default .*$/gm, `default ${o.target}`) : text;
}

/** pxe_grub_config.template (GRUB, UEFI) rendered. */
export function ironicGrubConfig(o: { deployKernel: string; deployRamdisk: string; akiPath: string; ariPath: string; appendParams: string; tftpServer: string; ramdiskOpts?: string; target?: string }): string {
  const text = `set default=deploy
set timeout=5
set hidden_timeout_quiet=false

menuentry "deploy"  {
    linux ${o.deployKernel} selinux=0 troubleshoot=0 text ${o.appendParams} boot_server=${o.tftpServer}
    initrd ${o.deployRamdisk}
}

menuentry "boot_ramdisk"  {
    linux ${o.akiPath} root=/dev/ram0 text ${o.appendParams} ${o.ramdiskOpts ?? ''}
    initrd ${o.ariPath}
}

menuentry "boot_whole_disk"  {
    linux chain.c32 mbr:(( DISK_IDENTIFIER ))
}

menuentry "boot_anaconda" {
     linux ${o.akiPath} text ${o.appendParams} inst.ks= inst.stage2=
     initrd ${o.ariPath}
}`;
  return o.target ? text.replace(/^((set )?default)=.*$/gm, `$1=${o.target}`) : text;
}

/** The MAC names _link_mac_pxe_configs creates (relative to the root) and what they point at. */
export function ironicMacLinks(nodeUuid: string, mac: string, ipxe: boolean): Tree {
  const hyph = mac.replace(/:/g, '-').toLowerCase();
  return {
    [`pxelinux.cfg/${ipxe ? '' : '01-'}${hyph}`]: `-> ../${nodeUuid}/config`,
    [`grub.cfg-01-${hyph}`]: `-> ${nodeUuid}/config`,
    [`${mac}.conf`]: `-> ${nodeUuid}/config`,
  };
}

/** dnsmasq's files as DnsmasqDHCPApi.update_dhcp_opts writes them for options from dhcp_options_for_instance (v4 then v6). */
export function ironicDnsmasqFiles(o: { nodeUuid: string; macs: string[]; tag: string; ipxe: boolean; bootFile: string; tftpServer: string; scriptUrl: string }): { hosts: Tree; opts: Tree } {
  const lines = o.ipxe
    ? [
      `tag:!ipxe,67,${o.bootFile}`, `tag:ipxe,67,${o.scriptUrl}`, `66,${o.tftpServer}`, `150,${o.tftpServer}`, `255,${o.tftpServer}`,
      `tag:!ipxe6,59,tftp://${o.tftpServer}/${o.bootFile}`, `tag:ipxe6,59,${o.scriptUrl}`,
    ]
    : [`67,${o.bootFile}`, `66,${o.tftpServer}`, `150,${o.tftpServer}`, `255,${o.tftpServer}`, `59,tftp://${o.tftpServer}/${o.bootFile}`];
  return {
    hosts: Object.fromEntries(o.macs.map((m) => [`ironic-${m}.conf`, `${m},set:${o.tag},set:ironic\n`])),
    opts: { [`ironic-${o.nodeUuid}.conf`]: `${lines.map((l) => `tag:${o.tag},${l}`).join('\n')}\n` },
  };
}

/** dnsmasq's host files after clean_dhcp_opts. */
export function ironicIgnoredHosts(macs: string[]): Tree {
  return Object.fromEntries(macs.map((m) => [`ironic-${m}.conf`, `${m},ignore\n`]));
}
