#!/usr/bin/env bash
# The attach path's figures: the round trip of an empty call from an attached process through
# its request ring to the daemon and back (median and p99 per PE), on a local cluster of one
# node with PES PEs, ROUNDS times. Usage: bench/attach.sh [BUILD_DIR] (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
pes=${PES:-2}
rounds=${ROUNDS:-5}
calls=${CALLS:-20000}
eval "$(SYMMESH_BIN=$PWD/$build/bin deploy/local-cluster.sh up --nodes 1 --ranks-per-node "$pes" --base-port 7350)"
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR" >/dev/null' EXIT
for round in $(seq "$rounds"); do
  echo "round $round"
  "$build/bin/symmesh" launch -- "$build/bin/symmesh_example_ping" "$calls" 2>/dev/null
done
