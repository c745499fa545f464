# shellcheck shell=bash
# What every benchmark script shares; sourced, not run. It builds the Release tree with the
# peers (once per bench/all.sh run), gives the statistics and formatting helpers, and records
# figures for bench/all.sh: with BENCH_RECORD set, `record` appends one JSON object a line.

# Installs the peers from Debian and builds build-bench/ (skipped when BENCH_BUILT=1, which
# bench/all.sh sets after building once); sets `bin`.
bench_setup() {
  if [[ "${BENCH_BUILT:-0}" != 1 ]]; then
    deploy/install-deps.sh --bench
    cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSYMMESH_BENCH=ON >/dev/null
    cmake --build build-bench -j "$(nproc)" >/dev/null
  fi
  # shellcheck disable=SC2034 # the sourcing script uses it
  bin=$PWD/build-bench/bin
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
}

# The median of the numbers on stdin, one a line (the mean of the middle two for an even count).
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# iperf3_gbps PORT [IPERF3 FLAGS...]: GB/s over loopback for 3 s, as the receivers counted it
# (both ways added up with --bidir), with an iperf3 server on 127.0.0.1:PORT for that one test.
iperf3_gbps() {
  local server_port=$1 out=""
  shift
  iperf3 --server --one-off --bind 127.0.0.1 --port "$server_port" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 50); do  # the server needs a moment to listen: retry, 50 tries of at most 20 s
    if out=$(timeout 20 iperf3 --client 127.0.0.1 --port "$server_port" --time 3 --json "$@" 2>/dev/null); then
      break
    fi
    sleep 0.1
  done
  # A one-off server whose client never got through (all tries failed) would wait for one
  # forever, and the bench with it.
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  /usr/bin/python3 -c 'import json, sys
end = json.load(sys.stdin)["end"]
print((end["sum_received"]["bits_per_second"] +
       end.get("sum_received_bidir_reverse", {}).get("bits_per_second", 0)) / 8e9)' <<<"$out"
}
# A number field of the one-line JSON on stdin (the CLI's --json output).
json_field() { grep -o "\"$1\":[0-9.e+-]*" | head -n 1 | cut -d: -f2; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
ms() { awk -v s="$1" 'BEGIN { printf "%.2f", s * 1000 }'; }
us() { awk -v s="$1" 'BEGIN { printf "%.1f", s * 1e6 }'; }

# record NAME VALUE UNIT lower|higher ["BASELINE..."]: one symmesh figure for bench/all.sh's
# JSON file; `lower` or `higher` says which way is better; the baselines name figures recorded
# in the same run that this one is compared against (the ratios go in the file too).
record() { record_figure false "$@"; }
# record_peer NAME VALUE UNIT lower|higher: a peer's figure (Gloo, OpenMPI, iperf3): a baseline,
# never flagged as a regression by bench/compare.py, but its drift shows the machine's.
record_peer() { record_figure true "$@"; }
record_figure() {
  [[ -n "${BENCH_RECORD:-}" ]] || return 0
  # A measurement that failed (a crashed peer run) leaves no number: say so, and keep the file
  # valid JSON for the other figures.
  if ! [[ "$3" =~ ^[0-9.eE+-]+$ ]]; then
    echo "bench: no figure for $2 (got '$3'); not recorded" >&2
    return 0
  fi
  printf '{"name": "%s", "value": %s, "unit": "%s", "better": "%s", "baseline": "%s", "peer": %s}\n' \
    "$2" "$3" "$4" "$5" "${6:-}" "$1" >>"$BENCH_RECORD"
}

# spawned_bench_cluster [BUILD_DIR]: for the benchmarks whose programs start their own processes
# (torch.multiprocessing.spawn): sets `build` (BUILD_DIR, or build-bench built by bench_setup),
# SYMMESH_BIN and `work` (a temporary folder), and brings up a cluster of 2 nodes x 2 PEs with
# 2 GiB heaps, which the programs find through SYMMESH_DAEMON; both go at exit.
spawned_bench_cluster() {
  if [[ $# -gt 0 ]]; then build=$1; else bench_setup; build=build-bench; fi
  export SYMMESH_BIN=$PWD/$build/bin
  work=$(mktemp -d)
  cluster=""
  trap '[[ -z "$cluster" ]] || deploy/local-cluster.sh down --dir "$cluster" >/dev/null; rm -rf "$work"' EXIT
  eval "$(deploy/local-cluster.sh up --nodes 2 --ranks-per-node 2 --heap-size 2GiB \
    --base-port "${SYMMESH_BENCH_PORT:-7350}")"
  cluster=$SYMMESH_CLUSTER_DIR
}
