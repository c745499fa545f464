#!/usr/bin/env bash
# Starts or stops a cluster of symmeshd daemons on this machine (loopback).
#
#   deploy/local-cluster.sh up --nodes K --ranks-per-node R [--transport auto|tcp|verbs]
#                              [--base-port P] [--heap-size SIZE] [--dir D] [-- SYMMESHD_FLAGS...]
#     Node i's control port is P+i (so node 0 answers on P, default 7400, the CLI's default),
#     the bootstrap root listens on P+K. A fresh secret and every log go to D (default: a new
#     private temporary directory). Waits until every node reports "ready", then prints
#     SYMMESH_DAEMON=..., SYMMESH_SECRET_FILE=..., SYMMESH_CLUSTER_DIR=... and
#     SYMMESH_STATUS_URL=... (node 0's HTTP status endpoint) as export lines to eval.
#     Flags after `--` go to every symmeshd as they are (for example -- --verbs-progress thread).
#   deploy/local-cluster.sh down [--dir D]
#     Stops that cluster (D defaults to $SYMMESH_CLUSTER_DIR) and waits until it is gone.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SYMMESH_BIN:-$root/build/bin}

die() { echo "local-cluster.sh: $*" >&2; exit 2; }

cmd=${1:-}
[[ -n "$cmd" ]] || die "usage: local-cluster.sh up|down [options]"
shift
nodes=2 ranks=2 transport=tcp base_port=7400 heap_size=256MiB dir="" ready_timeout=60
daemon_flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --) shift; daemon_flags=("$@"); break ;;
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) ranks=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --base-port) base_port=$2; shift 2 ;;
    --heap-size) heap_size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --ready-timeout) ready_timeout=$2; shift 2 ;;
    *) die "unknown option '$1' (allowed: --nodes --ranks-per-node --transport --base-port --heap-size --dir --ready-timeout, then -- SYMMESHD_FLAGS)" ;;
  esac
done

stop_cluster() {
  local d=$1
  local pids=()
  for f in "$d"/node-*.pid; do
    [[ -e "$f" ]] || continue
    pids+=("$(cat "$f")")
  done
  [[ ${#pids[@]} -gt 0 ]] && kill -TERM "${pids[@]}" 2>/dev/null || true
  # Wait (bounded) for every daemon to exit; then force the stragglers.
  for _ in $(seq 1 150); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [[ $alive -eq 0 ]] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -f "$d"/node-*.pid
}

case "$cmd" in
  up)
    [[ -x "$bin/symmeshd" && -x "$bin/symmesh" ]] || die "no binaries in $bin: build first (cmake --build build)"
    [[ "$nodes" =~ ^[0-9]+$ && "$nodes" -ge 1 ]] || die "--nodes must be a positive integer"
    [[ "$ranks" =~ ^[0-9]+$ && "$ranks" -ge 1 ]] || die "--ranks-per-node must be a positive integer"
    [[ -n "$dir" ]] || dir=$(mktemp -d "${TMPDIR:-/tmp}/symmesh-cluster.XXXXXX")
    mkdir -p "$dir"
    chmod 700 "$dir"
    secret="$dir/secret"
    (umask 077; head -c 32 /dev/urandom | base64 > "$secret")
    bootstrap="127.0.0.1:$((base_port + nodes))"
    for ((i = 0; i < nodes; i++)); do
      "$bin/symmeshd" --node-rank "$i" --nodes "$nodes" --ranks-per-node "$ranks" \
        --bootstrap "$bootstrap" --listen 127.0.0.1 --control-port "$((base_port + i))" \
        --transport "$transport" --heap-size "$heap_size" --secret-file "$secret" \
        --bootstrap-timeout "${ready_timeout}s" "${daemon_flags[@]}" >"$dir/node-$i.log" 2>&1 &
      echo $! >"$dir/node-$i.pid"
    done
    # Wait until every node reports "ready" (polled, bounded by --ready-timeout).
    deadline=$((SECONDS + ready_timeout))
    for ((i = 0; i < nodes; i++)); do
      until "$bin/symmesh" --daemon "127.0.0.1:$((base_port + i))" --secret-file "$secret" \
          --timeout 2s status --json 2>/dev/null | grep -q '"state":"ready"'; do
        if ! kill -0 "$(cat "$dir/node-$i.pid")" 2>/dev/null; then
          echo "local-cluster.sh: node $i exited; its log ($dir/node-$i.log) ends:" >&2
          tail -n 20 "$dir/node-$i.log" >&2
          stop_cluster "$dir"
          exit 1
        fi
        if ((SECONDS >= deadline)); then
          echo "local-cluster.sh: node $i not ready after ${ready_timeout}s; log $dir/node-$i.log ends:" >&2
          tail -n 20 "$dir/node-$i.log" >&2
          stop_cluster "$dir"
          exit 1
        fi
        sleep 0.2
      done
    done
    # Node 0's own endpoint: the top-level status_url of its reply, read by a JSON parser.
    status_url=$("$bin/symmesh" --daemon "127.0.0.1:$base_port" --secret-file "$secret" \
      --timeout 5s status --json | python3 -c 'import json, sys; print(json.load(sys.stdin).get("status_url", ""))')
    echo "export SYMMESH_DAEMON=127.0.0.1:$base_port"
    echo "export SYMMESH_SECRET_FILE=$secret"
    echo "export SYMMESH_CLUSTER_DIR=$dir"
    [[ -z "$status_url" ]] || echo "export SYMMESH_STATUS_URL=$status_url"
    ;;
  down)
    [[ -n "$dir" ]] || dir=${SYMMESH_CLUSTER_DIR:-}
    [[ -n "$dir" && -d "$dir" ]] || die "down: no cluster directory (pass --dir or set SYMMESH_CLUSTER_DIR)"
    stop_cluster "$dir"
    ;;
  *) die "unknown command '$cmd' (allowed: up, down)" ;;
esac
