#!/usr/bin/env bash
# Every benchmark at a size that finishes within 15 minutes on the 2-core machine (about 6),
# one after the other in one invocation, each printing its own table, every figure a median of
# 5 runs; then one JSON file of every figure the run recorded, and of each figure's ratio to
# the baselines measured in the same run.
# Compare two runs with `bench/compare.py OLD.json NEW.json`.
# Usage: bench/all.sh [OUT.json]  (default bench-results/<UTC time>-<commit>.json)
# VERBS=1 adds bench/transport.sh (the soft-RoCE guest where the host has no RDMA device,
# which takes long under emulation).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || commit="$commit+dirty"
out=${1:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)-$commit.json}
mkdir -p "$(dirname "$out")"
export BENCH_RECORD
BENCH_RECORD=$(mktemp)
trap 'rm -f "$BENCH_RECORD"' EXIT

bench_setup
export BENCH_BUILT=1
started=$(date +%s)
section() { echo; echo "== $* ($(($(date +%s) - started)) s in)"; }

section bench/collectives.sh
RUNS=5 SIZES="64KiB 1MiB 64MiB" bench/collectives.sh
section bench/tcp.sh
RUNS=5 bench/tcp.sh
section bench/fused.sh
RUNS=5 ITERS=5 SHAPES="4096x4096x1024" bench/fused.sh
section bench/moe.sh
RUNS=5 ITERS=5 TOKENS=1024 bench/moe.sh
section bench/attach.sh
ROUNDS=5 ITERS=5 PARTS=2,3 bench/attach.sh build-bench
section bench/torch_dist.sh
ROUNDS=5 ITERS=10 bench/torch_dist.sh build-bench
section bench/deep_ep.sh
ROUNDS=5 ITERS=5 bench/deep_ep.sh build-bench
if [[ "${VERBS:-0}" == 1 ]]; then
  section bench/transport.sh
  RUNS=3 bench/transport.sh
fi
section "done"

/usr/bin/python3 - "$BENCH_RECORD" "$out" "$commit" "$(($(date +%s) - started))" <<'EOF'
import json, os, platform, sys, time
records, out, commit, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
figures = {}
with open(records) as lines:
    for line in lines:
        entry = json.loads(line)
        figures[entry.pop("name")] = entry
for name, entry in figures.items():
    entry["ratios"] = {b: entry["value"] / figures[b]["value"]
                       for b in entry.pop("baseline").split() if figures.get(b, {}).get("value")}
run = {"commit": commit, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "machine": {"cores": os.cpu_count(), "kernel": platform.release()},
       "seconds": seconds, "figures": figures}
with open(out, "w") as f:
    json.dump(run, f, indent=1, sort_keys=True)
print(f"{len(figures)} figures in {out} ({seconds} s)")
EOF
