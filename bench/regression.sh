#!/usr/bin/env bash
# Before and after a change: the same jobs on two builds of symmesh, on this machine, in one
# invocation. Each round brings up a fresh local cluster (NODES x RANKS, default 2 nodes x 2
# ranks, over tcp) for one build, runs every job on it, takes it down, and does the same for the
# other build; the order of the builds flips each round. Only one cluster is up at a time: with
# two up at once the same binary ran the 64 MiB ring all-reduce about 9% slower on the cluster
# started second, which is what an A/B must not measure. For each job it prints the median over
# ROUNDS (default 5) of the job's own median, for both builds, after/before (for a time, above 1
# is slower; for a bandwidth, below 1 is), and in how many rounds the after build's figure was
# the lower. ONLY (an extended regex over the job names) runs a subset.
#   bench/regression.sh BEFORE_BIN_DIR AFTER_BIN_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:?usage: regression.sh BEFORE_BIN_DIR AFTER_BIN_DIR}
after=${2:?usage: regression.sh BEFORE_BIN_DIR AFTER_BIN_DIR}
rounds=${ROUNDS:-5}
port=${SYMMESH_BENCH_PORT:-7700}
nodes=${NODES:-2}
ranks=${RANKS:-2}

cluster_dir=""
start() {  # BIN_DIR -> the cluster's environment, as local-cluster.sh prints it
  SYMMESH_BIN=$1 deploy/local-cluster.sh up --nodes "$nodes" --ranks-per-node "$ranks" \
    --base-port "$port" --heap-size 1GiB
}
stop() {
  [[ -z "$cluster_dir" ]] || deploy/local-cluster.sh down --dir "$cluster_dir" >/dev/null || true
  cluster_dir=""
}
results=$(mktemp)
job_json=$(mktemp)
trap 'rm -f "$results" "$job_json"; stop' EXIT

# name | figure (a key of the --json result) | submit arguments
jobs=(
  "barrier dissemination|p50_us|barrier --algo dissemination --iters 2000"
  "allreduce 4 KiB hier|median_s|collective --op allreduce --bytes 4KiB --algo hier --iters 500"
  "allreduce 64 KiB hier|median_s|collective --op allreduce --bytes 64KiB --algo hier --iters 200"
  "allreduce 64 KiB ring|median_s|collective --op allreduce --bytes 64KiB --algo ring --iters 50"
  "allreduce 1 MiB hier|median_s|collective --op allreduce --bytes 1MiB --algo hier --iters 50"
  "allreduce 16 MiB hier|median_s|collective --op allreduce --bytes 16MiB --algo hier --iters 10"
  "allreduce 64 MiB hier|median_s|collective --op allreduce --bytes 64MiB --algo hier --iters 5"
  "allgather 16 MiB hier|median_s|collective --op allgather --bytes 16MiB --algo hier --iters 9"
  "allreduce 16 MiB ring|median_s|collective --op allreduce --bytes 16MiB --algo ring --iters 10"
  "reduce-scatter 16 MiB ring|median_s|collective --op reduce-scatter --bytes 16MiB --algo ring --iters 10"
  "alltoall 4 MiB|median_s|collective --op alltoall --bytes 4MiB --iters 10"
  "put-bw 1 MiB|gbps|transport --op put-bw --bytes 1MiB --window 16 --iters 20"
  "put-signal-lat 8 B|p50_us|transport --op put-signal-lat --bytes 8 --iters 2000"
  "gemm-allreduce 2048x2048x1024 fused|pipelined_s|matmul --op gemm-allreduce --m 2048 --k 2048 --n 1024 --mode fused --iters 3"
  "matmul-reduce-scatter 2048x2048x1024 fused|pipelined_s|matmul --op matmul-reduce-scatter --m 2048 --k 2048 --n 1024 --mode fused --iters 3"
  "combine 1024 tokens hier|median_s|combine --tokens 1024 --hidden 2048 --topk 4 --experts 16 --iters 3"
  "dispatch 1024 tokens hier|median_s|dispatch --tokens 1024 --hidden 7168 --topk 8 --experts 64 --iters 3"
  "combine 1024 tokens hier 7168|median_s|combine --tokens 1024 --hidden 7168 --topk 8 --experts 64 --iters 5"
  "dispatch 128 tokens low-latency|median_s|dispatch --algo low-latency --tokens 128 --hidden 7168 --topk 8 --experts 64 --iters 50"
  "combine 128 tokens low-latency|median_s|combine --algo low-latency --tokens 128 --hidden 7168 --topk 8 --experts 64 --iters 50"
)

# The result is read once the job has ended: a reader started beside it (python3 at the other
# end of a pipe) takes a core for its start-up while the job runs, which doubled the barrier's
# figure here.
run() {  # ENV BIN_DIR FIGURE ARGS -> the figure
  local figure=$3
  (eval "$1" && read -ra args <<<"$4" && "$2/symmesh" --json submit "${args[@]}") >"$job_json"
  python3 - "$job_json" "$figure" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:  # the client printed nothing (it died, or could not connect)
    r = {"status": "error", "error": "no result"}
print(r[sys.argv[2]] if r["status"] == "ok" else "error: " + r["error"])
PY
}

round_on() {  # BUILD(before|after) BIN_DIR: every job once on a fresh cluster of that build
  local env
  env=$(start "$2")
  cluster_dir=$(sed -n 's/^export SYMMESH_CLUSTER_DIR=//p' <<<"$env")
  for job in "${jobs[@]}"; do
    IFS='|' read -r name figure args <<<"$job"
    [[ -z "${ONLY:-}" ]] || [[ "$name" =~ $ONLY ]] || continue
    echo "$name|$1|$(run "$env" "$2" "$figure" "$args")" >>"$results"
  done
  stop
}

for ((round = 0; round < rounds; ++round)); do
  if ((round % 2 == 0)); then
    round_on before "$before"
    round_on after "$after"
  else
    round_on after "$after"
    round_on before "$before"
  fi
done

between=$([[ $nodes -gt 1 ]] && echo " over tcp" || true)
echo "symmesh bench/regression.sh: $(date -u +%F), $(nproc) cores, $nodes nodes x $ranks ranks$between, medians of $rounds rounds"
echo "before: $before"
echo "after:  $after"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, build, value = line.rstrip("\n").split("|")
    rows.setdefault(name, {}).setdefault(build, []).append(value)
print(f"| {'job':<44} | {'before':>12} | {'after':>12} | {'after/before':>12} | {'after lower':>11} |")
print(f"|{'-' * 46}|{'-' * 14}|{'-' * 14}|{'-' * 14}|{'-' * 13}|")
for name, builds in rows.items():
    try:
        before = [float(v) for v in builds["before"]]
        after = [float(v) for v in builds["after"]]
        b, a = statistics.median(before), statistics.median(after)
        lower = f"{sum(x < y for x, y in zip(after, before))} of {len(after)}"
        print(f"| {name:<44} | {b:>12.6g} | {a:>12.6g} | {a / b:>12.3f} | {lower:>11} |")
    except ValueError:
        print(f"| {name:<44} | {builds['before'][0]:>12} | {builds['after'][0]:>12} | {'-':>12} | {'-':>11} |")
PY
