#!/usr/bin/env bash
# Makes sure an RDMA device exists (adding an rxe device on `lo` when there is none) and
# prints "DEVICE GID_INDEX": the first device, and its RoCE v2 IPv4-mapped GID's index
# (what symmeshd picks by itself; perftest needs it spelled out with -x).
set -euo pipefail

first_device() { ibv_devices 2>/dev/null | awk 'NR > 2 {print $1; exit}'; }

device=$(first_device)
if [[ -z "$device" ]]; then
  ip link set lo up
  if ! rdma link add symmesh_rxe type rxe netdev lo; then
    echo "rxe-device.sh: step failed: 'rdma link add symmesh_rxe type rxe netdev lo'" >&2
    exit 1
  fi
  device=$(first_device)
fi
if [[ -z "$device" ]]; then
  echo "rxe-device.sh: step failed: an rxe link exists but ibv_devices lists no device" >&2
  exit 1
fi
gid_index=""
for gid in /sys/class/infiniband/"$device"/ports/1/gids/*; do
  index=${gid##*/}
  type=$(cat "/sys/class/infiniband/$device/ports/1/gid_attrs/types/$index" 2>/dev/null || true)
  if [[ "$type" == "RoCE v2" && "$(cat "$gid")" == 0000:0000:0000:0000:0000:ffff:* ]]; then
    gid_index=$index
    break
  fi
done
echo "$device ${gid_index:-0}"
