#!/usr/bin/env bash
# The soft-RoCE suite proper, run as root where an RDMA device can exist (the host, or the
# QEMU guest): makes sure an rxe device on `lo` is there, then runs the verbs tests serially.
# Usage: guest-tests.sh BUILD_DIR
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

if [[ -z "$(ibv_devices 2>/dev/null | awk 'NR > 2')" ]]; then
  ip link set lo up
  if ! rdma link add symmesh_rxe type rxe netdev lo; then
    echo "softroce: step failed: 'rdma link add symmesh_rxe type rxe netdev lo'" >&2
    diagnose
    exit 1
  fi
fi
if [[ -z "$(ibv_devices 2>/dev/null | awk 'NR > 2')" ]]; then
  echo "softroce: step failed: an rxe link exists but ibv_devices lists no device" >&2
  diagnose
  exit 1
fi
ibv_devinfo | grep -E "hca_id|state|active_mtu" | sed 's/^/softroce: /'

ulimit -l unlimited 2>/dev/null || true
if ! "$build/bin/symmesh_softroce_tests" "${@:2}"; then
  echo "softroce: the verbs tests failed" >&2
  diagnose
  exit 1
fi
