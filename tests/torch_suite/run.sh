#!/usr/bin/env bash
# torch's own distributed test suite on the symmesh backend, compared with gloo's outcomes.
#
#   tests/torch_suite/run.sh [BUILD_DIR]        (default build)
#
# Starts a local cluster of 2 nodes x 2 PEs, runs suite.py's CPU tests (WORLD_SIZE=4, file://
# init, as torch's test_distributed_spawn.py runs them for gloo) on symmesh, and fails unless
# every test that passes on gloo passes on symmesh. Gloo's outcomes depend only on the torch
# version, so they are recorded in gloo-outcomes.jsonl (Debian's python3-torch 1.13.1+dfsg-4:
# 104 pass, 114 skip, 9 error: the DDP tests, whose harness imports torch.distributed._shard,
# which fails under Python 3.11 with torch 1.13), made by
#   BACKEND=gloo WORLD_SIZE=4 TEMP_DIR=$(mktemp -d) PYTHONPATH=tests/torch_suite/stand_ins \
#     /usr/bin/python3 tests/torch_suite/suite.py --out gloo.jsonl
# By default only the tests gloo passes run (each test starts 4 processes, about 1 s even to
# skip); ALL=1 runs every CPU test and compares every outcome.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
export SYMMESH_BIN=$PWD/$build/bin
work=$(mktemp -d)
cluster=""
trap '[[ -z "$cluster" ]] || deploy/local-cluster.sh down --dir "$cluster" >/dev/null; rm -rf "$work"' EXIT
eval "$(deploy/local-cluster.sh up --nodes 2 --ranks-per-node 2 \
  --base-port "${SYMMESH_SUITE_PORT:-7460}")"
cluster=$SYMMESH_CLUSTER_DIR
names=()
if [[ "${ALL:-0}" != 1 ]]; then
  mapfile -t names < <(/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row["outcome"] == "pass":
        print(row["test"])' tests/torch_suite/gloo-outcomes.jsonl)
fi
mkdir -p "$work/tmp"
started=$(date +%s)
BACKEND=symmesh WORLD_SIZE=4 TEMP_DIR=$work/tmp \
  PYTHONPATH=$PWD/$build/python:$PWD/tests/torch_suite/stand_ins \
  /usr/bin/python3 tests/torch_suite/suite.py --out "$work/symmesh.jsonl" "${names[@]}" \
  >"$work/suite.log" 2>&1 || true
/usr/bin/python3 tests/torch_suite/compare.py tests/torch_suite/gloo-outcomes.jsonl \
  "$work/symmesh.jsonl" "$((${ALL:-0} == 1))" || {
  echo "tests/torch_suite/run.sh: the suite's log ends:" >&2
  tail -n 60 "$work/suite.log" >&2
  exit 1
}
echo "tests/torch_suite/run.sh: $(($(date +%s) - started)) s"
