#!/usr/bin/env bash
# DeepEP's API on symmesh (symmesh.deep_ep) against the symmesh API and gloo, in the same run:
# dispatch (bf16 and FP8) and combine at TOKENS per PE (default 1024) x 7168, topk 8, 64
# experts, on 2 nodes x 2 PEs over TCP, processes started by torch.multiprocessing.spawn.
# ROUNDS rounds (default 5) of ITERS calls (default 5); each figure is the median over the
# rounds of the round's median (of the slowest rank's time per call).
# Usage: bench/deep_ep.sh [BUILD_DIR] (default build-bench, built by bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
spawned_bench_cluster "$@"
rounds=${ROUNDS:-5}
iters=${ITERS:-5}
tokens=${TOKENS:-1024}
for round in $(seq "$rounds"); do
  if ! PYTHONPATH=$PWD/$build/python /usr/bin/python3 bench/deep_ep_bench.py 4 "$tokens" 7168 8 \
    64 "$iters" >>"$work/figures" 2>"$work/run.err"; then
    echo "bench/deep_ep.sh: round $round failed:" >&2
    tail -n 20 "$work/run.err" >&2
    exit 1
  fi
done
figure() { awk -v n="$1" '$1 == n { print $2 }' "$work/figures" | median; }
bf16=$(figure deep_ep_dispatch_bf16)
fp8=$(figure deep_ep_dispatch_fp8)
combine=$(figure deep_ep_combine)
both=$(figure deep_ep_dispatch_combine)
api=$(figure symmesh_dispatch_combine)
gloo=$(figure gloo_alltoall_dispatch_combine)
echo "== DeepEP's API on symmesh: $tokens tokens per PE x 7168, topk 8, 64 experts, 2 nodes x 2 PEs over TCP, $(nproc) CPUs, medians of $rounds rounds"
printf "| %-44s | %9s | %-28s |\n" "call" "median ms" "ratio"
printf "| %-44s | %9s | %-28s |\n" "deep_ep dispatch, bf16" "$(ms "$bf16")" ""
printf "| %-44s | %9s | %-28s |\n" "deep_ep dispatch, FP8 (e4m3 + scales)" "$(ms "$fp8")" \
  "$(ratio "$fp8" "$bf16") x the bf16 dispatch"
printf "| %-44s | %9s | %-28s |\n" "deep_ep combine, bf16" "$(ms "$combine")" ""
printf "| %-44s | %9s | %-28s |\n" "deep_ep dispatch + combine, bf16" "$(ms "$both")" \
  "$(ratio "$both" "$api") x symmesh API"
printf "| %-44s | %9s | %-28s |\n" "symmesh.Session dispatch + combine" "$(ms "$api")" ""
printf "| %-44s | %9s | %-28s |\n" "gloo all_to_all_single there and back" "$(ms "$gloo")" \
  "deep_ep: $(ratio "$both" "$gloo") x gloo"
record_peer deep_ep.gloo_alltoall "$gloo" s lower
record deep_ep.symmesh_api "$api" s lower
record deep_ep.dispatch_bf16 "$bf16" s lower
record deep_ep.dispatch_fp8 "$fp8" s lower deep_ep.dispatch_bf16
record deep_ep.combine "$combine" s lower
record deep_ep.dispatch_combine "$both" s lower "deep_ep.symmesh_api deep_ep.gloo_alltoall"
