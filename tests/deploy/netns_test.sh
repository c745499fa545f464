#!/usr/bin/env bash
# deploy/local-cluster.sh up --netns: two daemons, each in its own network namespace joined by
# veth pairs and a bridge, are separate hosts to the kernel (different network namespaces,
# different addresses); a verified allreduce and a verified MoE combine cross the bridge; and
# `down` removes the namespaces and the host's veth. Skipped (exit 77) where namespaces cannot
# be created (not root, no ip netns).  Usage: tests/deploy/netns_test.sh BIN_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export SYMMESH_BIN=${1:?usage: netns_test.sh BIN_DIR}
fail() { echo "netns_test: $*" >&2; exit 1; }

probe=symmesh-probe-$$
if [[ $(id -u) -ne 0 ]] || ! ip netns add "$probe" 2>/dev/null; then
  echo "netns_test: skipped: cannot create network namespaces here (needs root and ip netns)"
  exit 77
fi
ip netns del "$probe"

dir=$(mktemp -d "$SYMMESH_BIN/netns-test.XXXXXX")
trap '"$root/deploy/local-cluster.sh" down --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
eval "$("$root/deploy/local-cluster.sh" up --netns --nodes 2 --ranks-per-node 2 --heap-size 128MiB --dir "$dir")"
read -r subnet _ <"$dir/netns"
[[ "$SYMMESH_DAEMON" == "10.213.$subnet.1:7400" ]] || fail "SYMMESH_DAEMON is $SYMMESH_DAEMON"

# Separate hosts to the kernel: each daemon in a network namespace of its own.
host_ns=$(readlink /proc/self/ns/net)
ns0=$(readlink "/proc/$(cat "$dir/node-0.pid")/ns/net")
ns1=$(readlink "/proc/$(cat "$dir/node-1.pid")/ns/net")
[[ "$ns0" != "$ns1" && "$ns0" != "$host_ns" && "$ns1" != "$host_ns" ]] ||
  fail "the daemons share a network namespace ($ns0, $ns1, host $host_ns)"

cli="$SYMMESH_BIN/symmesh"
status=$("$cli" status --json)
python3 - "$status" "$subnet" <<'PY' || fail "status: $status"
import json, sys
status, subnet = json.loads(sys.argv[1]), sys.argv[2]
peer = status["peers"][0]
assert peer["up"] and peer["data_endpoint"].startswith(f"10.213.{subnet}.2:"), peer
assert status["status_url"].startswith(f"http://10.213.{subnet}.1:"), status["status_url"]
PY
allreduce=$("$cli" submit collective --op allreduce --bytes 1MiB --verify --json)
[[ "$allreduce" == *'"verified":true'* ]] || fail "allreduce: $allreduce"
combine=$("$cli" submit combine --tokens 64 --hidden 256 --topk 4 --experts 8 --verify --json)
[[ "$combine" == *'"verified":true'* ]] || fail "combine: $combine"
health=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1] + "/health", timeout=10).read().decode())' "$SYMMESH_STATUS_URL")
[[ "$health" == ok* ]] || fail "health: $health"

"$root/deploy/local-cluster.sh" down --dir "$dir"
[[ "$(ip netns list)" != *"symmesh-$subnet-"* ]] || fail "namespaces left: $(ip netns list)"
! ip link show "symh$subnet" &>/dev/null || fail "symh$subnet left"
echo "netns_test: ok (10.213.$subnet.0/24)"
