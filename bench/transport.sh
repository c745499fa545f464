#!/usr/bin/env bash
# Transport figures, tcp against verbs, next to perftest on the same RDMA device in the same
# run: put bandwidth from 4 KiB to 16 MiB (a window of puts, then quiet), and the latency
# (one way: half a ping-pong) of an 8-byte put_signal (data, then signal: two writes) and of
# the 8-byte signal alone (one write, as ib_write_lat's), between two symmeshd daemons of one
# rank each; ib_write_bw and ib_write_lat (perftest) on the same device and GID; and what a hop
# of two writes takes on that device (ib_write_lat plus one more write at ib_write_bw's 8-byte
# message rate), which put_signal is held against too.
# Where the host has no RDMA device (docs/OPERATIONS.md, "Soft-RoCE"), the whole run happens inside
# the soft-RoCE QEMU guest of tests/softroce, so every figure comes from the same emulated
# machine: soft-RoCE under TCG is slow, and the ratios are what to read.
# Every figure is the median over RUNS runs (default 3). Ratios: symmesh / perftest.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh --bench
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSYMMESH_BENCH=ON >/dev/null
cmake --build build-bench -j "$(nproc)" --target symmeshd symmesh >/dev/null
bin=$PWD/build-bench/bin

if [[ -n "$(ibv_devices 2>/dev/null | awk 'NR > 2')" ]] ||
  { [[ $(id -u) -eq 0 ]] && modprobe rdma_rxe 2>/dev/null; }; then
  echo "transport.sh: on this host's RDMA device"
  exec env RUNS="${RUNS:-3}" bench/transport-run.sh "$bin"
fi
echo "transport.sh: no RDMA device on this host: running inside the soft-RoCE QEMU guest"
image=$(tests/softroce/guest-image.sh build-bench/softroce/image)
SYMMESH_QEMU_TIMEOUT=1800 tests/softroce/qemu-run.sh "$image" build-bench/softroce/results -- \
  env RUNS="${RUNS:-3}" bench/transport-run.sh "$bin"
