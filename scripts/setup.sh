#!/usr/bin/env bash
# Installs what Tessera's build, tests and benches need from Debian, idempotently:
#   libiscsi-bin       third-party iSCSI initiator tools (iscsi-ls, iscsi-inq) for interop tests
#   libfontconfig1-dev fonts for the PNG plots every bench writes
#   iproute2           network namespaces for multi-host tests
#   e2fsprogs, mount   an ext4 on a loop device for the failing-disk test (mkfs.ext4, losetup)
# Rust comes with the machine (cargo/rustc 1.80 or newer).
set -euo pipefail

need=()
command -v iscsi-ls >/dev/null 2>&1 || need+=(libiscsi-bin)
command -v iscsi-inq >/dev/null 2>&1 || need+=(libiscsi-bin)
dpkg-query -W -f='${Status}' libfontconfig1-dev 2>/dev/null | grep -q "ok installed" || need+=(libfontconfig1-dev pkg-config)
dpkg-query -W -f='${Status}' fonts-dejavu-core 2>/dev/null | grep -q "ok installed" || need+=(fonts-dejavu-core)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || need+=(mount)

if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; Tessera needs a Rust toolchain (1.80 or newer) on PATH" >&2
  exit 1
fi
