#!/usr/bin/env bash
# The tcp transport against the wire it runs on, in one invocation on this machine: put
# bandwidth of 64 MiB puts (a window of 4, then quiet) between two daemons of one rank each,
# next to iperf3 with one stream over the same loopback; and the one-way latency of an 8-byte
# put_signal (half a ping-pong). Every figure is the median over RUNS runs (default 5).
# Ratio: symmesh / iperf3 (the target is at least 0.8).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

runs=${RUNS:-5}
bench_setup
port=${SYMMESH_BENCH_PORT:-7600}
eval "$(SYMMESH_BIN=$bin deploy/local-cluster.sh up --nodes 2 --ranks-per-node 1 \
  --base-port "$port" --heap-size 512MiB)"
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"' EXIT

symmesh_bw() {
  "$bin/symmesh" submit transport --op put-bw --bytes 64MiB --window 4 --iters 5 --json |
    json_field gbps
}
symmesh_lat() {
  "$bin/symmesh" submit transport --op put-signal-lat --bytes 8 --iters 2000 --json |
    json_field p50_us
}
bw=$(for _ in $(seq "$runs"); do symmesh_bw; done | median)
iperf=$(for _ in $(seq "$runs"); do iperf3_gbps $((port + 90)); done | median)
lat=$(for _ in $(seq "$runs"); do symmesh_lat; done | median)

echo "symmesh bench/tcp.sh: $(date -u +%F), $(nproc) cores, $(uname -r), runs=$runs"
echo "2 nodes x 1 rank over tcp on loopback; medians of $runs runs"
printf "| %-36s | %9s | %9s |\n" what symmesh "/ iperf3"
printf "|%s|\n" "--------------------------------------|-----------|----------"
printf "| %-36s | %9.3f | %9s |\n" "put bandwidth 64 MiB, GB/s" "$bw" "$(ratio "$bw" "$iperf")"
printf "| %-36s | %9.3f | %9s |\n" "iperf3, one stream, GB/s" "$iperf" ""
printf "| %-36s | %9.1f | %9s |\n" "8-byte put_signal one way, us" "$lat" ""
record_peer tcp.iperf3_gbps "$iperf" GB/s higher
record tcp.put_bw_64MiB "$bw" GB/s higher tcp.iperf3_gbps
record tcp.put_signal_lat "$lat" us lower
