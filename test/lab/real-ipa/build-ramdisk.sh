#!/bin/bash
# Builds the ramdisk of the real-IPA lab (test/lab/real-ipa.ts, docs/vm-lab.md): a kernel and
# an initramfs running ironic-python-agent from its source, on Debian bookworm's packages.
#
#   build-ramdisk.sh IPA_SOURCE OUT_DIR [IPA_VERSION]
#
# IPA_SOURCE is a checkout of openstack/ironic-python-agent (a directory with setup.py, built as
# it is), or a git directory of it (a bare clone, or a checkout's .git) with IPA_VERSION the tag
# to build. For a checkout IPA_VERSION defaults to the tag of its HEAD. It is the version pbr
# gives the package.
#
# Writes OUT_DIR/ipa.kernel, OUT_DIR/ipa.initramfs and OUT_DIR/build-info.txt (versions and
# the packages installed). Runs as root (debootstrap, chroot). DEBIAN_MIRROR overrides the
# mirror (http://deb.debian.org/debian); the root file system is built under TMPDIR
# (/var/tmp), about 900 MB, and removed at the end, also on failure.
set -euo pipefail

SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# What the agent runs, and the Python libraries it imports, from Debian rather than pip.
# python3-cffi-backend: python3-cryptography needs python3-cffi-backend-api-*, a virtual package
#   debootstrap does not resolve; without it the base system fails to configure.
# psmisc: fuser, which the erase_devices_metadata clean step runs.
# bsdextrautils: hexdump, with which the agent reads a whole-disk image's disk identifier.
# python3-setuptools: pbr's setup.py.
PACKAGES=(
  python3 python3-pbr python3-setuptools python3-cffi-backend
  python3-eventlet python3-netifaces python3-oslo.config python3-oslo.concurrency python3-oslo.log
  python3-oslo.service python3-oslo.utils python3-pint python3-psutil python3-pyudev python3-requests
  python3-stevedore python3-tenacity python3-ironic-lib python3-werkzeug python3-cryptography python3-tooz
  qemu-utils parted gdisk util-linux udev dmidecode lshw efibootmgr mdadm hdparm isc-dhcp-client
  iproute2 kmod linux-image-cloud-amd64 pciutils e2fsprogs dosfstools lvm2 xfsprogs smartmontools
  ipmitool busybox psmisc bsdextrautils
)
# Commands the agent runs in the lab's steps (inspect, clean, deploy, power off), checked in the
# result so that a package dropped from the list fails here and not in the middle of a deploy.
COMMANDS=(ironic-python-agent fuser poweroff reboot hexdump efibootmgr sgdisk parted qemu-img blkid lsblk dhclient udevadm dmidecode lshw)

die() {
  echo "build-ramdisk.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 IPA_SOURCE OUT_DIR [IPA_VERSION]" >&2
  exit 2
}

[ $# -ge 2 ] && [ $# -le 3 ] || usage
SOURCE=$1
OUT=$2
VERSION=${3:-}

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian package $2)"); }
need debootstrap debootstrap
need chroot coreutils
need cpio cpio
need gzip gzip
need tar tar
need mount mount
need umount mount
need git git
[ ${#missing[@]} -eq 0 ] || die "missing: ${missing[*]}"

# The source: a checkout as it is, or a tag of a git directory.
if [ -f "$SOURCE/setup.py" ] && [ -f "$SOURCE/setup.cfg" ]; then
  KIND=checkout
  if [ -z "$VERSION" ]; then
    VERSION=$(git -C "$SOURCE" describe --tags --exact-match 2>/dev/null) ||
      die "$SOURCE: its HEAD has no tag; give the version pbr should use as IPA_VERSION"
  fi
elif git --git-dir="$SOURCE" rev-parse --git-dir >/dev/null 2>&1; then
  KIND=git
  [ -n "$VERSION" ] || die "$SOURCE is a git directory: give the tag to build as IPA_VERSION (e.g. 9.4.3)"
  git --git-dir="$SOURCE" rev-parse --verify --quiet "refs/tags/$VERSION^{commit}" >/dev/null ||
    die "$SOURCE has no tag $VERSION"
  git --git-dir="$SOURCE" cat-file -e "$VERSION:setup.cfg" 2>/dev/null ||
    die "tag $VERSION of $SOURCE has no setup.cfg: not ironic-python-agent?"
else
  die "$SOURCE is neither a checkout of ironic-python-agent (setup.py, setup.cfg) nor a git directory"
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/ipa-ramdisk.XXXXXX")
ROOTFS=$WORK/rootfs

# Every mount under the work directory, deepest first (debootstrap's own, if it was stopped,
# and the chroot's /proc).
mounts_under() {
  awk -v p="$WORK/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  local m
  for m in $(mounts_under); do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
  if [ -n "$(mounts_under)" ]; then
    echo "build-ramdisk.sh: still mounted under $WORK, left in place: $(mounts_under | tr '\n' ' ')" >&2
  else
    # --one-file-system: whatever happens above, never into a mount.
    rm -rf --one-file-system "$WORK"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { echo "==> $*"; }

step "debootstrap $SUITE (minbase and ${#PACKAGES[@]} packages) from $MIRROR into $ROOTFS"
if ! debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
  tail -n 30 "$WORK/debootstrap.log" >&2
  [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" >&2
  die "debootstrap failed (the end of its logs is above)"
fi

step "ironic-python-agent $VERSION from $SOURCE ($KIND)"
mkdir -p "$ROOTFS/tmp/ipa"
if [ "$KIND" = git ]; then
  git --git-dir="$SOURCE" archive --format=tar "refs/tags/$VERSION" | tar -x -C "$ROOTFS/tmp/ipa"
else
  tar -C "$SOURCE" --exclude=.git --exclude=.tox --exclude='*.egg-info' --exclude=build -cf - . | tar -x -C "$ROOTFS/tmp/ipa"
fi
mount -t proc proc "$ROOTFS/proc"
# pbr takes the version from PBR_VERSION, with no git in the chroot; the packages' own
# dependencies are Debian's (installed above), so setup.py installs IPA alone.
chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  PBR_VERSION="$VERSION" SKIP_GENERATE_AUTHORS=1 SKIP_WRITE_GIT_CHANGELOG=1 \
  /bin/sh -ec 'cd /tmp/ipa
    python3 setup.py -q install --single-version-externally-managed --root=/ --install-layout=deb >/tmp/ipa-install.log 2>&1 || { tail -n 30 /tmp/ipa-install.log; exit 1; }
    python3 -m compileall -q /usr/lib/python3/dist-packages/ironic_python_agent
    python3 -c "import ironic_python_agent.agent, ironic_python_agent.hardware"' ||
  die "installing ironic-python-agent failed"
umount "$ROOTFS/proc"

step "init, poweroff and the agent's configuration"
install -m 0755 "$HERE/init" "$ROOTFS/init"
install -m 0755 "$HERE/poweroff" "$ROOTFS/usr/local/sbin/poweroff"
ln -sf poweroff "$ROOTFS/usr/local/sbin/reboot"
mkdir -p "$ROOTFS/etc/ironic-python-agent"
printf '# Every parameter comes from the kernel command line.\n[DEFAULT]\n' >"$ROOTFS/etc/ironic-python-agent/ipa.conf"
echo ipa-ramdisk >"$ROOTFS/etc/hostname"

absent=()
for c in "${COMMANDS[@]}"; do
  chroot "$ROOTFS" /bin/sh -c "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin command -v $c" >/dev/null || absent+=("$c")
done
[ ${#absent[@]} -eq 0 ] || die "the root file system lacks ${absent[*]}"

kernels=("$ROOTFS"/boot/vmlinuz-*)
[ ${#kernels[@]} -eq 1 ] && [ -f "${kernels[0]}" ] || die "expected one kernel in $ROOTFS/boot, found: ${kernels[*]}"
KERNEL_RELEASE=${kernels[0]##*/vmlinuz-}

{
  echo "ipa_version=$VERSION"
  echo "ipa_source=$SOURCE ($KIND)"
  echo "debian_suite=$SUITE"
  echo "kernel=$KERNEL_RELEASE"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "packages:"
  chroot "$ROOTFS" dpkg-query -W -f '  ${Package} ${Version}\n'
} >"$WORK/build-info.txt"

step "ipa.kernel and ipa.initramfs (cpio, gzip) into $OUT"
cp "${kernels[0]}" "$WORK/ipa.kernel"
# What a running agent never reads: apt's caches and lists, documentation, the kernel's files
# in /boot (the kernel is beside the ramdisk), the source.
rm -rf "$ROOTFS/boot"/* "$ROOTFS/tmp"/* "$ROOTFS/var/cache/apt"/* "$ROOTFS/var/lib/apt/lists"/* \
  "$ROOTFS/usr/share/doc"/* "$ROOTFS/usr/share/man"/* "$ROOTFS/usr/share/locale"/* "$ROOTFS/debootstrap"
(cd "$ROOTFS" && find . -xdev -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$WORK/ipa.initramfs"
mv "$WORK/ipa.kernel" "$OUT/ipa.kernel"
mv "$WORK/ipa.initramfs" "$OUT/ipa.initramfs"
mv "$WORK/build-info.txt" "$OUT/build-info.txt"
step "done: $(du -h "$OUT/ipa.kernel" | cut -f1) kernel $KERNEL_RELEASE, $(du -h "$OUT/ipa.initramfs" | cut -f1) initramfs, ironic-python-agent $VERSION"
