#!/usr/bin/env bash
# torch.distributed on symmesh against torch.distributed on gloo, in the same run: all_reduce
# (float32 SUM) of 64 KiB to 64 MiB, all_to_all_single of 1 and 16 MiB, broadcast of 1 and 16
# MiB, and one DDP step of a 12.6M-parameter MLP, on 2 nodes x 2 PEs over TCP (one process per
# PE, torch.multiprocessing.spawn, private tensors as a torch program has them). Also each
# all_reduce through symmesh.Session.all_reduce on the same tensor (the symmesh API), and
# dist.all_reduce of a tensor made on the symmetric heap (nothing copied in or out).
# ROUNDS rounds (default 5), gloo and symmesh alternating; each figure is the median of the
# rounds' figures, each a call's time over ITERS calls back to back (default 10).
# Usage: bench/torch_dist.sh [BUILD_DIR] (default build-bench, built by bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
spawned_bench_cluster "$@"
rounds=${ROUNDS:-5}
iters=${ITERS:-10}
for round in $(seq "$rounds"); do
  for backend in gloo symmesh; do
    if ! PYTHONPATH=$PWD/$build/python /usr/bin/python3 bench/torch_dist_bench.py "$backend" 4 \
      "$iters" >"$work/run.out" 2>"$work/run.err"; then
      echo "bench/torch_dist.sh: $backend failed in round $round:" >&2
      tail -n 20 "$work/run.err" >&2
      exit 1
    fi
    sed "s/^/$backend /" "$work/run.out" >>"$work/figures"
  done
done
figure() {  # figure BACKEND NAME: the median over the rounds
  awk -v b="$1" -v n="$2" '$1 == b && $2 == n { print $3 }' "$work/figures" | median
}
echo "== torch.distributed: symmesh against gloo, 2 nodes x 2 PEs over TCP, $(nproc) CPUs, medians of $rounds rounds"
printf "| %-26s | %10s | %10s | %9s | %22s | %24s |\n" "call" "gloo ms" "symmesh ms" "vs gloo" \
  "vs symmesh.Session" "heap tensor, vs gloo"
name_of() { awk -v b="$1" 'BEGIN { split("64 KiB,1 MiB,16 MiB,64 MiB", n, ","); split("65536,1048576,16777216,67108864", s, ","); for (i in s) if (s[i] == b) print n[i] }'; }
for size in 65536 1048576 16777216 67108864; do
  gloo=$(figure gloo "all_reduce_$size")
  ours=$(figure symmesh "all_reduce_$size")
  session=$(figure symmesh "session_all_reduce_$size")
  heap=$(figure symmesh "heap_all_reduce_$size")
  printf "| %-26s | %10s | %10s | %9s | %22s | %24s |\n" "all_reduce $(name_of "$size")" \
    "$(ms "$gloo")" "$(ms "$ours")" "$(ratio "$ours" "$gloo")" \
    "$(ratio "$ours" "$session") ($(ms "$session") ms)" "$(ms "$heap") ms, $(ratio "$heap" "$gloo")"
  record "torch_dist.heap_all_reduce_$size" "$heap" s lower "torch_dist.all_reduce_${size}_gloo"
  record_peer "torch_dist.all_reduce_${size}_gloo" "$gloo" s lower
  record "torch_dist.all_reduce_$size" "$ours" s lower "torch_dist.all_reduce_${size}_gloo"
done
for op in all_to_all_single broadcast; do
  for size in 1048576 16777216; do
    gloo=$(figure gloo "${op}_$size")
    ours=$(figure symmesh "${op}_$size")
    printf "| %-26s | %10s | %10s | %9s | %22s | %24s |\n" "$op $(name_of "$size")" \
      "$(ms "$gloo")" "$(ms "$ours")" "$(ratio "$ours" "$gloo")" "" ""
    record_peer "torch_dist.${op}_${size}_gloo" "$gloo" s lower
    record "torch_dist.${op}_$size" "$ours" s lower "torch_dist.${op}_${size}_gloo"
  done
done
gloo=$(figure gloo ddp_step)
ours=$(figure symmesh ddp_step)
printf "| %-26s | %10s | %10s | %9s | %22s | %24s |\n" "DDP step (12.6M params)" \
  "$(ms "$gloo")" "$(ms "$ours")" "$(ratio "$ours" "$gloo")" "" ""
record_peer torch_dist.ddp_step_gloo "$gloo" s lower
record torch_dist.ddp_step "$ours" s lower torch_dist.ddp_step_gloo
