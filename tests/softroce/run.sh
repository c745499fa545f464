#!/usr/bin/env bash
# The soft-RoCE suite: the verbs transport and two symmeshd daemons with --transport verbs,
# on a real RDMA device. Where the host kernel can provide one (a device exists, or
# `rdma link add ... type rxe` works) the tests run on the host; otherwise inside a QEMU
# guest booting Debian's own kernel with rdma_rxe (see docs/OPERATIONS.md, "Soft-RoCE", for why).
# Usage: tests/softroce/run.sh [BUILD_DIR]     (default: build; built here if needed)
# SYMMESH_SKIP_SOFTROCE=1 skips it, saying so, for machines that truly cannot run either;
# SYMMESH_SOFTROCE_FILTER (a gtest filter) runs a part, SYMMESH_SOFTROCE_REPEAT times (default 1:
# more hunts for a rare failure); TSAN_OPTIONS reaches the tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}

if [[ "${SYMMESH_SKIP_SOFTROCE:-0}" == 1 ]]; then
  echo "softroce: SKIPPED: SYMMESH_SKIP_SOFTROCE=1 was set; the verbs transport was not tested"
  exit 0
fi
fail() {
  echo "softroce: FAILED at step: $*" >&2
  exit 1
}

deploy/install-deps.sh --softroce || fail "installing the soft-RoCE packages (deploy/install-deps.sh --softroce)"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || fail "configuring $build"
fi
cmake --build "$build" -j "$(nproc)" --target symmesh_softroce_tests symmeshd symmesh >/dev/null ||
  fail "building symmesh_softroce_tests"
build=$(cd "$build" && pwd)
start=$(date +%s)
# The outcomes, for tests/reliability-report.sh's table (the guest writes here too).
mkdir -p "$build/softroce/results"
rm -f "$build/softroce/results/softroce.json"
filter=("--gtest_filter=${SYMMESH_SOFTROCE_FILTER:-*}" "--gtest_repeat=${SYMMESH_SOFTROCE_REPEAT:-1}"
  "--gtest_output=json:$build/softroce/results/softroce.json")

# True when the host has an RDMA device, or can make an rxe one (rxe-device.sh does).
host_device() {
  [[ -n "$(ibv_devices 2>/dev/null | awk 'NR > 2')" ]] && return 0
  [[ $(id -u) -eq 0 ]] || return 1
  modprobe rdma_rxe 2>/dev/null || [[ -d /sys/module/rdma_rxe ]]
}

if host_device; then
  echo "softroce: running on the host's RDMA device"
  status=0
  tests/softroce/guest-tests.sh "$build" "${filter[@]}" || status=$?
  rdma link delete symmesh_rxe 2>/dev/null || true
else
  echo "softroce: the host kernel has no RDMA device and cannot make one; using a QEMU guest"
  # One guest image for every build directory (a sanitizer build reuses the main one's).
  image=$(tests/softroce/guest-image.sh "$PWD/build/softroce/image") ||
    fail "preparing the guest kernel and initramfs (tests/softroce/guest-image.sh)"
  status=0
  # SYMMESH_LINK_DRILL: the guest is the test's own, so the link-drop drill may add and drop links.
  tests/softroce/qemu-run.sh "$image" "$build/softroce/results" -- \
    env "TSAN_OPTIONS=${TSAN_OPTIONS:-}" SYMMESH_LINK_DRILL=1 tests/softroce/guest-tests.sh \
    "$build" --gtest_brief=1 "${filter[@]}" || status=$?
  if [[ $status -eq 125 ]]; then
    fail "booting the QEMU guest (console: $build/softroce/results/console.log)"
  fi
  if [[ $status -ne 0 ]]; then
    echo "---- guest kernel log (tail)"
    grep -v "speed is unknown" "$build/softroce/results/kernel.log" 2>/dev/null | tail -n 30
  fi
fi
echo "softroce: finished in $(($(date +%s) - start)) s with exit code $status"
exit "$status"
