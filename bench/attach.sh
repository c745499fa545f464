#!/usr/bin/env bash
# The attach path's figures, each part ROUNDS times (medians of the rounds' medians):
#  1. the round trip of an empty call from an attached process through its request ring to the
#     daemon and back (median and p99 per PE; one node, PES PEs);
#  2. MoE dispatch + combine through the Python API at DeepEP's shape scaled down as
#     bench/moe.sh does (hidden 7168, topk 8, 64 experts, TOKENS per PE, default 512, bf16;
#     2 nodes x 2 PEs over TCP), next to the same exchange with torch.distributed's gloo
#     backend (all_to_all_single there and back) and to the CLI's dispatch and combine jobs,
#     with private tensors and with every tensor on the heap;
#     then each call alone with its large input (x, the expert rows) in private memory and on
#     the heap, and with its output (recv_x, the combined tokens) on the heap too;
#  3. all_reduce of 64 MiB of float32 through the Python API (a heap tensor) next to the CLI's
#     allreduce job of the same size: the API should cost at most 1.1x the CLI's.
# Usage: bench/attach.sh [BUILD_DIR] (default build). PARTS=1,2,3 picks parts.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build}
# local-cluster.sh runs this build's daemon and CLI for `up` and `launch` alike.
export SYMMESH_BIN=$PWD/$build/bin
bin=$SYMMESH_BIN
pes=${PES:-2}
rounds=${ROUNDS:-5}
calls=${CALLS:-20000}
tokens=${TOKENS:-512}
iters=${ITERS:-10}
parts=${PARTS:-1,2,3}
hidden=7168 topk=8 experts=64
python=(env "PYTHONPATH=$PWD/$build/python" /usr/bin/python3 "$PWD/bench/attach_bench.py")
work=$(mktemp -d)
cluster=""
trap '[[ -z "$cluster" ]] || deploy/local-cluster.sh down --dir "$cluster" >/dev/null; rm -rf "$work"' EXIT

up() {  # up NODES PES HEAP
  eval "$(deploy/local-cluster.sh up --nodes "$1" --ranks-per-node "$2" \
    --heap-size "$3" --base-port "${SYMMESH_BENCH_PORT:-7350}")"
  cluster=$SYMMESH_CLUSTER_DIR
}
# Runs attach_bench.py ARGS on every PE of the cluster; prints rank 0's figures. The PEs' chatter
# is kept out of the output, and shown if the launch fails.
launch_rank0() {
  if ! deploy/local-cluster.sh launch --dir "$cluster" -- "${python[@]}" "$@" \
    >"$work/launch.out" 2>"$work/launch.err"; then
    echo "bench/attach.sh: attach_bench.py $1 failed:" >&2
    tail -n 20 "$work/launch.err" >&2
    exit 1
  fi
  sed -n 's/^\[rank 0\] //p' "$work/launch.out"
}
down() {
  deploy/local-cluster.sh down --dir "$cluster" >/dev/null
  cluster=""
}

if [[ ",$parts," == *,1,* ]]; then
  up 1 "$pes" 256MiB
  echo "== 1. empty call round trip, 1 node x $pes PEs, $calls calls a round"
  for round in $(seq "$rounds"); do
    echo "round $round"
    "$bin/symmesh" launch -- "$bin/symmesh_example_ping" "$calls" 2>/dev/null
  done
  down
fi

if [[ ",$parts," == *,2,* || ",$parts," == *,3,* ]]; then
  up 2 2 2GiB
fi
if [[ ",$parts," == *,2,* ]]; then
  echo "== 2. dispatch + combine: tokens=$tokens per PE, hidden=$hidden, topk=$topk, experts=$experts, bf16, 2 nodes x 2 PEs over TCP, $iters iterations a round"
  for round in $(seq "$rounds"); do
    port=$((29500 + round))
    launch_rank0 moe "$tokens" "$hidden" "$topk" "$experts" "$iters" "$port" >>"$work/moe"
    for op in dispatch combine; do
      "$bin/symmesh" submit "$op" --tokens "$tokens" --hidden "$hidden" --topk "$topk" \
        --experts "$experts" --iters "$iters" --json | json_field median_s >>"$work/cli-$op"
    done
  done
  api=$(awk '$1 == "symmesh_dispatch_combine" { print $2 }' "$work/moe" | median)
  api_heap=$(awk '$1 == "symmesh_dispatch_combine_heap" { print $2 }' "$work/moe" | median)
  gloo=$(awk '$1 == "gloo_alltoall_dispatch_combine" { print $2 }' "$work/moe" | median)
  cli=$(paste "$work/cli-dispatch" "$work/cli-combine" | awk '{ print $1 + $2 }' | median)
  printf "| %-50s | %9s | %12s |\n" "" "median ms" "vs Python API"
  printf "| %-50s | %9s | %12s |\n" "symmesh Python API: dispatch + combine" "$(ms "$api")" "1.00"
  printf "| %-50s | %9s | %12s |\n" "symmesh Python API, every tensor on the heap" \
    "$(ms "$api_heap")" "$(ratio "$api_heap" "$api")"
  printf "| %-50s | %9s | %12s |\n" "torch.distributed gloo: all_to_all_single x2" "$(ms "$gloo")" "$(ratio "$gloo" "$api")"
  printf "| %-50s | %9s | %12s |\n" "symmesh CLI jobs: dispatch + combine" "$(ms "$cli")" "$(ratio "$cli" "$api")"
  record_peer attach.moe_gloo "$gloo" s lower
  record attach.moe_cli "$cli" s lower
  record attach.moe_api "$api" s lower "attach.moe_gloo attach.moe_cli"
  record attach.moe_api_heap "$api_heap" s lower "attach.moe_gloo attach.moe_cli attach.moe_api"
  printf "| %-50s | %9s | %12s |\n" "each call alone" "median ms" "vs private"
  for op in dispatch combine; do
    if [[ $op == dispatch ]]; then input=x; else input=rows; fi
    private=$(awk -v f="symmesh_${op}_private_$input" '$1 == f { print $2 }' "$work/moe" | median)
    heap=$(awk -v f="symmesh_${op}_heap_$input" '$1 == f { print $2 }' "$work/moe" | median)
    cli_op=$(median <"$work/cli-$op")
    printf "| %-50s | %9s | %12s |\n" "symmesh Python API $op, $input in private memory" \
      "$(ms "$private")" "1.00"
    printf "| %-50s | %9s | %12s |\n" "symmesh Python API $op, $input on the heap" "$(ms "$heap")" \
      "$(ratio "$heap" "$private")"
    both=$(awk -v f="symmesh_${op}_heap_${input}_out" '$1 == f { print $2 }' "$work/moe" | median)
    printf "| %-50s | %9s | %12s |\n" "symmesh Python API $op, $input, out on the heap" \
      "$(ms "$both")" "$(ratio "$both" "$private")"
    record "attach.${op}_heap_${input}_out" "$both" s lower "attach.${op}_private_$input"
    printf "| %-50s | %9s | %12s |\n" "symmesh CLI $op job" "$(ms "$cli_op")" \
      "$(ratio "$cli_op" "$private")"
    record "attach.${op}_private_$input" "$private" s lower
    record "attach.${op}_heap_$input" "$heap" s lower "attach.${op}_private_$input"
  done
fi
if [[ ",$parts," == *,3,* ]]; then
  echo "== 3. all_reduce of 64 MiB float32, 2 nodes x 2 PEs over TCP, $iters iterations a round"
  for round in $(seq "$rounds"); do
    launch_rank0 allreduce $((64 << 20)) "$iters" >>"$work/allreduce"
    "$bin/symmesh" submit collective --op allreduce --bytes 64MiB --dtype f32 --iters "$iters" \
      --json | json_field median_s >>"$work/cli-allreduce"
  done
  api=$(awk '$1 == "symmesh_api_allreduce" { print $2 }' "$work/allreduce" | median)
  cli=$(median <"$work/cli-allreduce")
  printf "| %-30s | %9s | %8s |\n" "" "median ms" "vs CLI"
  printf "| %-30s | %9s | %8s |\n" "CLI allreduce job" "$(ms "$cli")" "1.00"
  printf "| %-30s | %9s | %8s |\n" "Python API all_reduce (heap)" "$(ms "$api")" "$(ratio "$api" "$cli")"
  record attach.allreduce_cli "$cli" s lower
  record attach.allreduce_api "$api" s lower attach.allreduce_cli
fi
