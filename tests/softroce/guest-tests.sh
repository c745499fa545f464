#!/usr/bin/env bash
# The soft-RoCE suite proper, run as root where an RDMA device can exist (the host, or the
# QEMU guest): makes sure an rxe device on `lo` is there, then runs the verbs tests serially.
# Usage: guest-tests.sh BUILD_DIR [GTEST_FLAGS...]
set -uo pipefail
build=${1:?usage: guest-tests.sh BUILD_DIR}

diagnose() {
  echo "---- rdma link"
  rdma link 2>&1
  echo "---- ibv_devinfo -v"
  ibv_devinfo -v 2>&1 | head -n 80
  echo "---- kernel log (tail)"
  dmesg 2>/dev/null | grep -v "speed is unknown" | tail -n 30
  echo "---- hw counters"
  grep -H . /sys/class/infiniband/*/ports/*/hw_counters/* 2>/dev/null
}

if ! device=$("$(dirname "$0")/rxe-device.sh"); then
  diagnose
  exit 1
fi
echo "softroce: device and GID index: $device"
ibv_devinfo | grep -E "hca_id|state|active_mtu" | sed 's/^/softroce: /'

ulimit -l unlimited 2>/dev/null || true
if ! "$build/bin/symmesh_softroce_tests" "${@:2}"; then
  echo "softroce: the verbs tests failed" >&2
  diagnose
  exit 1
fi
