#!/usr/bin/env bash
# Starts or stops a cluster of symmeshd daemons on this machine (loopback).
#
#   deploy/local-cluster.sh up --nodes K --ranks-per-node R [--transport auto|tcp|verbs]
#                              [--base-port P] [--heap-size SIZE] [--dir D] [-- SYMMESHD_FLAGS...]
#     Node i's control port is P+i (so node 0 answers on P, default 7400, the CLI's default),
#     the bootstrap root listens on P+K. A fresh secret and every log go to D (default: a new
#     private temporary directory). Waits until every node reports "ready", then prints
#     SYMMESH_DAEMON=..., SYMMESH_SECRET_FILE=..., SYMMESH_CLUSTER_DIR=... and
#     SYMMESH_STATUS_URL=... (node 0's HTTP status endpoint) and SYMMESH_DATA_DIR=... (where
#     jobs' --inputs and --output files go) as export lines to eval.
#     Flags after `--` go to every symmeshd as they are (for example -- --verbs-progress thread).
#     Each daemon gets --cpus (this host's CPUs over the nodes) unless those flags give one.
#     --netns (root only): each daemon in its own network namespace, so the nodes are separate
#     hosts to the kernel: node i is 10.213.S.(i+1) on a bridge that lives in a namespace of
#     its own, and this host reaches them as 10.213.S.254 through one more veth pair (S: the
#     first subnet no interface here uses). The CLI works from this host as usual.
#   deploy/local-cluster.sh launch [--dir D] -- COMMAND [ARGS...]
#     Runs `symmesh launch -- COMMAND` against every node of that cluster at once (D defaults to
#     $SYMMESH_CLUSTER_DIR): one process per PE, each line prefixed with its rank. Exits with
#     the first non-zero exit of a node's launch.
#   deploy/local-cluster.sh down [--dir D]
#     Stops that cluster (D defaults to $SYMMESH_CLUSTER_DIR) and waits until it is gone, with
#     its namespaces, veth pairs and addresses.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SYMMESH_BIN:-$root/build/bin}

die() { echo "local-cluster.sh: $*" >&2; exit 2; }

cmd=${1:-}
[[ -n "$cmd" ]] || die "usage: local-cluster.sh up|launch|down [options]"
shift
nodes=2 ranks=2 transport=tcp base_port=7400 heap_size=256MiB dir="" ready_timeout=60 netns=0
daemon_flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --) shift; daemon_flags=("$@"); break ;;  # launch: the command
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) ranks=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --base-port) base_port=$2; shift 2 ;;
    --heap-size) heap_size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --ready-timeout) ready_timeout=$2; shift 2 ;;
    --netns) netns=1; shift ;;
    *) die "unknown option '$1' (allowed: --nodes --ranks-per-node --transport --base-port --heap-size --dir --ready-timeout --netns, then -- SYMMESHD_FLAGS)" ;;
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
  [[ -e "$d/netns" ]] && netns_down "$d"
  return 0
}

# --netns: namespaces symmesh-S-0.. (the nodes) and symmesh-S-br (the bridge), and the
# interface symh<S> here; $d/netns remembers S and the node count for `down`.
netns_up() {
  local d=$1 s
  for ((s = 0; s < 256; s++)); do  # a subnet no interface of this host is on
    [[ -z "$(ip -4 -o addr show to "10.213.$s.0/24")" ]] && ! ip link show "symh$s" &>/dev/null &&
      [[ "$(ip netns list)" != *"symmesh-$s-"* ]] && break
  done
  ((s < 256)) || die "--netns: no free subnet in 10.213.0.0/16"
  subnet=10.213.$s
  echo "$s $nodes" >"$d/netns"
  local br=symmesh-$s-br
  ip netns add "$br" || die "--netns: cannot create network namespaces (needs root and ip netns)"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  ip link add "symh$s" type veth peer name host netns "$br"
  ip -n "$br" link set host master br0 up
  ip addr add "$subnet.254/24" dev "symh$s"
  ip link set "symh$s" up
  for ((i = 0; i < nodes; i++)); do
    local ns=symmesh-$s-$i
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "node$i" netns "$br"
    ip -n "$br" link set "node$i" master br0 up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

netns_down() {
  local d=$1 s n
  read -r s n <"$d/netns"
  for ((i = 0; i < n; i++)); do ip netns del "symmesh-$s-$i" 2>/dev/null || true; done
  ip netns del "symmesh-$s-br" 2>/dev/null || true  # takes symh<S>'s peer, so symh<S> too
  ip link del "symh$s" 2>/dev/null || true
  rm -f "$d/netns"
}

# Where node i listens, and the command prefix that starts it there.
address_of() { [[ $netns == 1 ]] && echo "$subnet.$(($1 + 1))" || echo 127.0.0.1; }
runner_of() { [[ $netns == 1 ]] && echo "ip netns exec symmesh-${subnet##*.}-$1" || true; }

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
    subnet=""
    if [[ $netns == 1 ]]; then
      # Whatever stops `up` half way (a failed ip command under set -e included) removes them.
      trap '[[ -e "$dir/netns" ]] && netns_down "$dir"' EXIT
      netns_up "$dir"
    fi
    bootstrap="$(address_of 0):$((base_port + nodes))"
    # The daemons share this host's CPUs: each sizes its jobs for its share, unless told.
    cpus_flags=(--cpus "$(( $(nproc) / nodes > 0 ? $(nproc) / nodes : 1 ))")
    [[ " ${daemon_flags[*]} " == *" --cpus "* ]] && cpus_flags=()
    for ((i = 0; i < nodes; i++)); do
      status_flags=()  # reachable from this host, not only inside the namespace
      [[ $netns == 1 ]] && status_flags=(--status-addr "$(address_of "$i"):0")
      # `ip netns exec` execs the daemon, so $! is the daemon's pid.
      $(runner_of "$i") "$bin/symmeshd" --node-rank "$i" --nodes "$nodes" --ranks-per-node "$ranks" \
        --bootstrap "$bootstrap" --listen "$(address_of "$i")" --control-port "$((base_port + i))" \
        --transport "$transport" --heap-size "$heap_size" --secret-file "$secret" \
        --data-dir "$dir/data" --bootstrap-timeout "${ready_timeout}s" "${status_flags[@]}" "${cpus_flags[@]}" \
        "${daemon_flags[@]}" \
        >"$dir/node-$i.log" 2>&1 &
      echo $! >"$dir/node-$i.pid"
    done
    # Wait until every node reports "ready" (polled, bounded by --ready-timeout).
    deadline=$((SECONDS + ready_timeout))
    for ((i = 0; i < nodes; i++)); do
      until "$bin/symmesh" --daemon "$(address_of "$i"):$((base_port + i))" --secret-file "$secret" \
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
    status_url=$("$bin/symmesh" --daemon "$(address_of 0):$base_port" --secret-file "$secret" \
      --timeout 5s status --json | python3 -c 'import json, sys; print(json.load(sys.stdin).get("status_url", ""))')
    # What `launch` needs to find every node again.
    printf 'nodes=%q base_port=%q netns=%q subnet=%q\n' "$nodes" "$base_port" "$netns" "$subnet" \
      >"$dir/cluster.env"
    echo "export SYMMESH_DAEMON=$(address_of 0):$base_port"
    echo "export SYMMESH_SECRET_FILE=$secret"
    echo "export SYMMESH_DATA_DIR=$dir/data"
    echo "export SYMMESH_CLUSTER_DIR=$dir"
    [[ -z "$status_url" ]] || echo "export SYMMESH_STATUS_URL=$status_url"
    trap - EXIT  # up: the namespaces stay until `down`
    ;;
  launch)
    [[ -n "$dir" ]] || dir=${SYMMESH_CLUSTER_DIR:-}
    [[ -n "$dir" && -f "$dir/cluster.env" ]] || die "launch: no cluster started by 'up' (pass --dir or set SYMMESH_CLUSTER_DIR)"
    [[ ${#daemon_flags[@]} -gt 0 ]] || die "launch: no command (local-cluster.sh launch -- COMMAND ARGS...)"
    source "$dir/cluster.env"
    pids=()
    for ((i = 0; i < nodes; i++)); do
      "$bin/symmesh" --daemon "$(address_of "$i"):$((base_port + i))" --secret-file "$dir/secret" \
        launch -- "${daemon_flags[@]}" &
      pids+=($!)
    done
    status=0
    for pid in "${pids[@]}"; do
      wait "$pid" || { code=$?; [[ $status -ne 0 ]] || status=$code; }
    done
    exit "$status"
    ;;
  down)
    [[ -n "$dir" ]] || dir=${SYMMESH_CLUSTER_DIR:-}
    [[ -n "$dir" && -d "$dir" ]] || die "down: no cluster directory (pass --dir or set SYMMESH_CLUSTER_DIR)"
    stop_cluster "$dir"
    ;;
  *) die "unknown command '$cmd' (allowed: up, launch, down)" ;;
esac
