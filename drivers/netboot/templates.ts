/**
 * The boot configurations Galvanic writes when `[pxe]` names no template file of the
 * operator's. Each renders to what Ironic's default template renders for the same node (Ironic
 * writes them with Jinja2's defaults), so a node boots the same under either; the labels are
 * Ironic's, since `switchBootTarget` (Ironic's switch_pxe_config) picks one by its name:
 * `deploy` (the agent), `boot_ramdisk` (the ramdisk deploy), `boot_whole_disk` (the disk),
 * `boot_anaconda`. Boot from volume is not offered, hence no iSCSI section.
 */

/** iPXE, served over HTTP from `[deploy] http_root` (Ironic's ipxe_config.template). */
export const IPXE_CONFIG = `#!ipxe

set attempts:int32 10
set i:int32 0

goto deploy

:deploy
imgfree
kernel {% if pxe_options.ipxe_timeout > 0 %}--timeout {{ pxe_options.ipxe_timeout }} {% endif %}{{ pxe_options.deployment_aki_path }} selinux=0 troubleshoot=0 text {{ pxe_options.pxe_append_params|default("", true) }} BOOTIF=\${mac} initrd={{ pxe_options.initrd_filename|default("deploy_ramdisk", true) }} || goto retry

initrd {% if pxe_options.ipxe_timeout > 0 %}--timeout {{ pxe_options.ipxe_timeout }} {% endif %}{{ pxe_options.deployment_ari_path }} || goto retry
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
kernel {% if pxe_options.ipxe_timeout > 0 %}--timeout {{ pxe_options.ipxe_timeout }} {% endif %}{{ pxe_options.aki_path }} text {{ pxe_options.pxe_append_params|default("", true) }} inst.ks={{ pxe_options.ks_cfg_url }} {% if pxe_options.repo_url %}inst.repo={{ pxe_options.repo_url }}{% else %}inst.stage2={{ pxe_options.stage2_url }}{% endif %} initrd=ramdisk || goto boot_anaconda
initrd {% if pxe_options.ipxe_timeout > 0 %}--timeout {{ pxe_options.ipxe_timeout }} {% endif %}{{ pxe_options.ari_path }} || goto boot_anaconda
boot

:boot_ramdisk
imgfree
{%- if pxe_options.boot_iso_url %}
sanboot {{ pxe_options.boot_iso_url }}
{%- else %}
kernel {% if pxe_options.ipxe_timeout > 0 %}--timeout {{ pxe_options.ipxe_timeout }} {% endif %}{{ pxe_options.aki_path }} root=/dev/ram0 text {{ pxe_options.pxe_append_params|default("", true) }} {{ pxe_options.ramdisk_opts|default('', true) }} initrd=ramdisk || goto boot_ramdisk
initrd {% if pxe_options.ipxe_timeout > 0 %}--timeout {{ pxe_options.ipxe_timeout }} {% endif %}{{ pxe_options.ari_path }} || goto boot_ramdisk
boot
{%- endif %}

:boot_whole_disk
sanboot --no-describe || exit 0
`;

/** PXELINUX, over TFTP from `[pxe] tftp_root` in BIOS mode (Ironic's pxe_config.template). */
export const PXELINUX_CONFIG = `default deploy

label deploy
kernel {{ pxe_options.deployment_aki_path }}
append initrd={{ pxe_options.deployment_ari_path }} selinux=0 troubleshoot=0 text {{ pxe_options.pxe_append_params|default("", true) }}
ipappend 2

label boot_whole_disk
COM32 chain.c32
append mbr:{{ DISK_IDENTIFIER }}

label boot_ramdisk
kernel {{ pxe_options.aki_path }}
append initrd={{ pxe_options.ari_path }} root=/dev/ram0 text {{ pxe_options.pxe_append_params|default("", true) }} {{ pxe_options.ramdisk_opts|default('', true) }}

label boot_anaconda
kernel {{ pxe_options.aki_path }}
append initrd={{ pxe_options.ari_path }} text {{ pxe_options.pxe_append_params|default("", true) }} inst.ks={{ pxe_options.ks_cfg_url }} inst.stage2={{ pxe_options.stage2_url }}
ipappend 2
`;

/** GRUB, over TFTP from `[pxe] tftp_root` in UEFI mode (Ironic's pxe_grub_config.template). */
export const GRUB_CONFIG = `set default=deploy
set timeout=5
set hidden_timeout_quiet=false

menuentry "deploy"  {
    {{ pxe_options.linux_cmd|default('linux', true) }} {{ pxe_options.deployment_aki_path }} selinux=0 troubleshoot=0 text {{ pxe_options.pxe_append_params|default("", true) }} boot_server={{pxe_options.tftp_server}}
    {{ pxe_options.initrd_cmd|default('initrd', true) }} {{ pxe_options.deployment_ari_path }}
}

menuentry "boot_ramdisk"  {
    {{ pxe_options.linux_cmd|default('linux', true) }} {{ pxe_options.aki_path }} root=/dev/ram0 text {{ pxe_options.pxe_append_params|default("", true) }} {{ pxe_options.ramdisk_opts|default('', true) }}
    {{ pxe_options.initrd_cmd|default('initrd', true) }} {{ pxe_options.ari_path }}
}

menuentry "boot_whole_disk"  {
    {{ pxe_options.linux_cmd|default('linux', true) }} chain.c32 mbr:{{ DISK_IDENTIFIER }}
}

menuentry "boot_anaconda" {
     {{ pxe_options.linux_cmd|default('linux', true) }} {{ pxe_options.aki_path }} text {{ pxe_options.pxe_append_params|default("", true) }} inst.ks={{ pxe_options.ks_cfg_url }} {% if pxe_options.repo_url %}inst.repo={{ pxe_options.repo_url }}{% else %}inst.stage2={{ pxe_options.stage2_url }}{% endif %}
     {{ pxe_options.initrd_cmd|default('initrd', true) }} {{ pxe_options.ari_path }}
}
`;

/**
 * The script DHCP hands to iPXE (`<http_root>/boot.ipxe`, Ironic's boot.ipxe): it chains to
 * the configuration of the MAC it booted from, else tries each NIC's in turn. Its comment is
 * Ironic's, so that the file is the one an Ironic conductor writes.
 */
export const BOOT_IPXE = `#!ipxe

# NOTE(lucasagomes): Loop over all network devices and boot from
# the first one capable of booting. For more information see:
# https://bugs.launchpad.net/ironic/+bug/1504482
set netid:int32 -1
:loop
inc netid || chain {{ ipxe_for_mac_uri }}\${mac:hexhyp} || goto old_rom
isset \${net\${netid}/mac} || goto loop_done
echo Attempting to boot from MAC \${net\${netid}/mac:hexhyp}
chain {{ ipxe_for_mac_uri }}\${net\${netid}/mac:hexhyp} || goto loop

# If we've got here the chained config returned success
# suggesting "sanboot" in boot_whole_disk failed (some UEFI cases)
# exit 0 so the bios continues to the next device
echo Exiting pxe config to allow boot to continue on next device
exit 0

:loop_done
{% if ipxe_fallback_script -%}
chain {{ ipxe_fallback_script }} | goto boot_failed

:boot_failed
{% endif -%}
echo PXE boot failed! No configuration found for any of the present NICs.
echo Press any key to reboot...
prompt --timeout 180
reboot

:old_rom
{% if ipxe_fallback_script -%}
chain {{ ipxe_fallback_script }} | goto boot_failed_old_rom

:boot_failed_old_rom
{% endif -%}
echo PXE boot failed! No configuration found for NIC \${mac:hexhyp}.
echo Please update your iPXE ROM and retry.
echo Press any key to reboot...
prompt --timeout 180
reboot
`;
