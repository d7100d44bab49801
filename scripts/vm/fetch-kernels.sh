#!/usr/bin/env bash
# Downloads the Debian kernels the emulated runs boot (scripts/vm/run.sh)
# into a cache, at test time; nothing of it is committed.
#
#   arm64 6.1   Debian 12's linux-image-6.1.0-*-arm64: its vmlinuz is an
#               uncompressed Image with CONFIG_RSEQ=y and the PL011 console
#               built in (qemu-system-aarch64 -M virt boots it directly)
#   amd64 6.1   Debian 12's linux-image-6.1.0-*-amd64: no mm_cid, honours
#               possible_cpus= (many possible CPUs, few present)
#   amd64 6.12  bookworm-backports' linux-image-6.12*-amd64: has mm_cid
#               (AT_RSEQ_FEATURE_SIZE 32), caps possible CPUs at present
#   armhf 6.1   Debian 12's linux-image-6.1.0-*-armmp: a zImage for ARMv7
#               with CONFIG_RSEQ=y, the virt machine and the PL011 console
#               (qemu-system-arm -M virt -cpu cortex-a15), NR_CPUS=8
#   riscv64 6.12 Debian 13's linux-image-6.12*-riscv64: CONFIG_RSEQ=y,
#               NR_CPUS=128 (qemu-system-riscv64 -M virt -bios default)
#
# apt runs with a private state directory (its own sources.list, lists,
# cache and an empty dpkg status, APT::Architectures amd64, arm64, armhf and
# riscv64), so the
# host's dpkg architectures, apt lists and installed packages are untouched.
# Only `apt-get download` of the packages themselves: nothing is installed;
# `dpkg-deb -x` unpacks each into the cache.
#
# The machines scripts/vm/run.sh boots are described here too (`machines`
# below, printed by --machine ARCH), so that a port's emulated machine is one
# line of this file beside its kernel's; what the port itself is (its cross
# triplet, the tools that read its code) comes from its arch header
# (tests/arch_headers.py).
#
# Cache: $PCPU_VM_CACHE, default ~/.cache/pcpu-vm. Re-running is a no-op
# once the kernels are there (delete the folder to refresh).
# Prints the three vmlinuz paths as KEY=PATH lines on stdout (run.sh reads
# them); progress goes to stderr.
set -euo pipefail

# ARCH (run.sh's name, the arch header's PCPU_ARCH_NAME)  kernel package
# architecture  default kernel  default vCPUs  TCG beyond the host's CPUs
# (multi: a thread per vCPU; single: one for all)  emulator  console  the
# emulator's machine arguments
machines=(
  "aarch64 arm64 6.1 2 single qemu-system-aarch64 ttyAMA0 -M virt -cpu max,pauth-impdef=on -m 1024"
  "x86_64 amd64 6.1 16 multi qemu-system-x86_64 ttyS0 -M q35 -cpu max -m 2048"
  "arm armhf 6.1 4 multi qemu-system-arm ttyAMA0 -M virt -cpu cortex-a15 -m 1024"
  "riscv64 riscv64 6.12 4 multi qemu-system-riscv64 ttyS0 -M virt -cpu rv64 -bios default -m 1024"
)
if [ "${1:-}" = --machine ]; then
  for m in "${machines[@]}"; do
    [ "${m%% *}" = "${2:-}" ] && { echo "$m"; exit 0; }
  done
  echo "fetch-kernels.sh: no machine ${2:-}" >&2
  exit 1
fi

cache=${PCPU_VM_CACHE:-$HOME/.cache/pcpu-vm}
mirror=${PCPU_VM_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# KEY  architecture  suite  package-name pattern (the newest match is taken)
kernels=(
  "arm64_6.1 arm64 bookworm ^linux-image-6\.1\.0-[0-9]+-arm64$"
  "amd64_6.1 amd64 bookworm ^linux-image-6\.1\.0-[0-9]+-amd64$"
  "amd64_6.12 amd64 bookworm-backports ^linux-image-6\.12\.[0-9.+~a-z]*-amd64$"
  "armhf_6.1 armhf bookworm ^linux-image-6\.1\.0-[0-9]+-armmp$"
  "riscv64_6.12 riscv64 trixie ^linux-image-6\.12\.[0-9.+~a-z]*-riscv64$"
)

have_all=1
for k in "${kernels[@]}"; do
  set -- $k
  [ -f "$cache/$1/vmlinuz" ] || have_all=0
done

if [ $have_all -eq 0 ]; then
  start=$SECONDS
  apt_dir=$cache/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/empty" "$apt_dir/prefs"
  : >"$apt_dir/status"
  cat >"$apt_dir/sources.list" <<EOF
deb [arch=amd64,arm64,armhf signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main
deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main
deb [arch=riscv64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main
EOF
  apt_opts=(
    -o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o "Dir::Etc::SourceParts=$apt_dir/empty"
    -o "Dir::Etc::Preferences=$apt_dir/prefs/none"
    -o "Dir::Etc::PreferencesParts=$apt_dir/prefs"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::State::Status=$apt_dir/status"
    -o "Dir::Cache=$apt_dir/cache"
    -o "APT::Architecture=amd64"
    -o "APT::Architectures::=amd64"
    -o "APT::Architectures::=arm64"
    -o "APT::Architectures::=armhf"
    -o "APT::Architectures::=riscv64"
    -o "Debug::NoLocking=1"
    -o "Acquire::Languages=none"
  )
  # As root, apt drops to _apt for downloads, which cannot write into a
  # private folder under root's home: download as the caller instead.
  [ "$(id -u)" -ne 0 ] || apt_opts+=(-o "APT::Sandbox::User=root")
  echo "fetch-kernels: apt-get update (private state in $apt_dir)" >&2
  apt-get "${apt_opts[@]}" -qq update >&2
  for k in "${kernels[@]}"; do
    set -- $k
    key=$1 arch=$2 suite=$3 pattern=$4
    [ -f "$cache/$key/vmlinuz" ] && continue
    # Newest package of the suite matching the pattern: apt-cache's list of
    # names, then the highest version among them.
    pkg=$(apt-cache "${apt_opts[@]}" pkgnames linux-image-6. 2>/dev/null \
            | sed 's/:.*//' | grep -E "$pattern" | sort -V | tail -1 || true)
    if [ -z "$pkg" ]; then
      echo "fetch-kernels: no package matching $pattern in $suite ($arch)" >&2
      exit 1
    fi
    echo "fetch-kernels: $key: apt-get download $pkg:$arch/$suite" >&2
    rm -rf "$cache/dl" && mkdir -p "$cache/dl"
    (cd "$cache/dl" && apt-get "${apt_opts[@]}" -qq download "$pkg:$arch/$suite" >&2)
    rm -rf "$cache/$key.tmp" && mkdir -p "$cache/$key.tmp"
    dpkg-deb -x "$cache"/dl/*.deb "$cache/$key.tmp/root"
    # vmlinuz-* (riscv64: vmlinux-*, an Image that QEMU boots as it is)
    vmlinuz=$(ls "$cache/$key.tmp/root/boot/"vmlinu[zx]-* | head -1)
    mv "$vmlinuz" "$cache/$key.tmp/vmlinuz"
    basename "$vmlinuz" | sed "s/^vmlinu[zx]-//" >"$cache/$key.tmp/release"
    # Only the kernel image is used (the tests need no module).
    rm -rf "$cache/$key.tmp/root" "$cache/dl"
    rm -rf "$cache/$key" && mv "$cache/$key.tmp" "$cache/$key"
  done
  rm -rf "$apt_dir/cache/archives" "$apt_dir/cache/"*.bin
  echo "fetch-kernels: done in $((SECONDS - start)) s" >&2
fi

for k in "${kernels[@]}"; do
  set -- $k
  echo "$1=$cache/$1/vmlinuz"
done
