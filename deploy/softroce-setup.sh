#!/usr/bin/env bash
# Soft-RoCE on a real host: creates an rxe device on a network interface, prints its GID
# table and the symmeshd flags that use it, or says exactly why it cannot.
# Usage: deploy/softroce-setup.sh INTERFACE [DEVICE_NAME]      (as root)
#        deploy/softroce-setup.sh --remove DEVICE_NAME
set -euo pipefail

die() {
  echo "softroce-setup.sh: $*" >&2
  exit 1
}

if [[ "${1:-}" == "--remove" ]]; then
  rdma link delete "${2:?usage: softroce-setup.sh --remove DEVICE_NAME}"
  exit 0
fi
netdev=${1:?usage: softroce-setup.sh INTERFACE [DEVICE_NAME]   (for example: eth0 rxe0)}
name=${2:-rxe_$netdev}

[[ $(id -u) -eq 0 ]] || die "must run as root (it loads a module and adds an RDMA link)"
command -v rdma >/dev/null || die "no 'rdma' tool: install iproute2 (apt-get install iproute2)"
command -v ibv_devinfo >/dev/null ||
  die "no 'ibv_devinfo': install ibverbs-utils and the rxe provider (apt-get install ibverbs-utils ibverbs-providers rdma-core)"
ip link show "$netdev" >/dev/null 2>&1 || die "no network interface '$netdev' (see: ip link)"
if ! modprobe rdma_rxe 2>/dev/null && [[ ! -d /sys/module/rdma_rxe ]]; then
  if [[ -r /boot/config-$(uname -r) ]] && ! grep -q "^CONFIG_RDMA_RXE=" "/boot/config-$(uname -r)"; then
    die "this kernel ($(uname -r)) is built without soft-RoCE (CONFIG_RDMA_RXE is not set)"
  fi
  die "cannot load the rdma_rxe module for kernel $(uname -r) (no module tree, or not permitted)"
fi
modprobe crc32_generic 2>/dev/null || true  # rxe needs the crc32 shash; some kernels lack the dependency
if ! rdma link show "$name/1" >/dev/null 2>&1; then
  rdma link add "$name" type rxe netdev "$netdev" || die "'rdma link add $name type rxe netdev $netdev' failed"
fi
ip link set "$netdev" up

echo "device $name on $netdev:"
rdma link show "$name/1"
echo
echo "GID table (index: GID, type):"
gid_index=""
for gid in /sys/class/infiniband/"$name"/ports/1/gids/*; do
  index=${gid##*/}
  value=$(cat "$gid")
  [[ "$value" == 0000:0000:0000:0000:0000:0000:0000:0000 ]] && continue
  type=$(cat "/sys/class/infiniband/$name/ports/1/gid_attrs/types/$index" 2>/dev/null || echo "?")
  echo "  $index: $value, $type"
  if [[ -z "$gid_index" && "$type" == "RoCE v2" && "$value" == 0000:0000:0000:0000:0000:ffff:* ]]; then
    gid_index=$index
  fi
done
echo
if [[ -z "$gid_index" ]]; then
  echo "no RoCE v2 IPv4 GID yet: give $netdev an IPv4 address, then run this again"
  exit 1
fi
echo "symmeshd flags: --transport verbs --rdma-device $name --rdma-gid-index $gid_index"
echo "(symmeshd picks the same device and GID by itself with --transport auto;"
echo " its locked-memory limit must cover the heap: ulimit -l unlimited, or LimitMEMLOCK=infinity)"
