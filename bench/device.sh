#!/usr/bin/env bash
# The headline benchmarks of a many-core host in one run, for a host where time is short and
# only a results file comes back: the fused operators at 2 x 1 with the daemons' default
# threads (mode both, then auto), then barrier, all-reduce (64 KiB, 1 MiB, 64 MiB) and MoE
# dispatch and combine (1024 tokens x 7168, top-8 of 64 experts, bf16) at 2 x 4, 4 x 4 and, on
# one node, 1 x 8, each next to Gloo with as many ranks (gloo_bench) and the MoE calls next to
# torch.distributed gloo's all_to_all_single there and back (bench/peers/torch_gloo_moe.py).
# Every job's JSON, and every peer's line, goes to RESULTS: a line each, "NAME JSON".
#
# Usage: bench/device.sh RESULTS
#   SYMMESH_BIN   symmeshd and symmesh (default build/bin); local-cluster.sh is taken from
#                 beside it (its parent) when there is one there, else from deploy/
#   GLOO_BENCH    the Gloo peer (default $SYMMESH_BIN/gloo_bench; missing: no Gloo rows)
#   TORCH_PYTHON  a python3 with torch (default /opt/torch/.venv/bin/python3, else python3)
#   QUICK=1       small sizes and few iterations: a dry run of the whole script (minutes on 2
#                 cores), to try it before the host's few minutes are spent on it
set -euo pipefail
cd "$(dirname "$0")/.."
results=${1:?usage: bench/device.sh RESULTS}
bin=${SYMMESH_BIN:-$PWD/build/bin}
export SYMMESH_BIN=$bin
cluster_script=deploy/local-cluster.sh
[[ -x "$bin/../local-cluster.sh" ]] && cluster_script=$bin/../local-cluster.sh
gloo=${GLOO_BENCH:-$bin/gloo_bench}
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
[[ -x "$python" ]] || python=python3
quick=${QUICK:-0}
if [[ $quick == 1 ]]; then
  shapes=("512 512 256") tokens=64 hidden=256 experts=16 big=$((4 << 20)) iters=2 mode_iters=1
  layouts=("2 2" "1 4")
else
  shapes=("4096 4096 1024" "5416 6144 1408") tokens=1024 hidden=7168 experts=64
  big=$((64 << 20)) iters=5 mode_iters=5
  layouts=("2 4" "4 4" "1 8")
fi
topk=8
cluster=""
trap '[[ -z "$cluster" ]] || bash "$cluster_script" down --dir "$cluster" >/dev/null 2>&1 || true' EXIT
: >>"$results"

up() {  # up NODES RANKS HEAP
  eval "$(bash "$cluster_script" up --nodes "$1" --ranks-per-node "$2" --heap-size "$3" \
    --base-port "${SYMMESH_BENCH_PORT:-7450}" | grep '^export')"
  cluster=$SYMMESH_CLUSTER_DIR
}
down() {
  bash "$cluster_script" down --dir "$cluster" >/dev/null
  cluster=""
}
# job NAME ARGS...: one symmesh job, its JSON line kept (or its error, named).
job() {
  local name=$1 out
  shift
  out=$("$bin/symmesh" --timeout 600s "$@" --json 2>&1) || true
  echo "$name ${out//$'\n'/ }" | tee -a "$results"
}
# gloo NAME RANKS OP BYTES ITERS: Gloo's time for the same collective, if the peer is here.
gloo() {
  [[ -x "$gloo" ]] || return 0
  local store
  store=$(mktemp -d)
  for ((r = 1; r < $2; r++)); do "$gloo" "$r" "$2" "$store" "$3" "$4" "$5" >/dev/null & done
  echo "$1 gloo ranks=$2 op=$3 bytes=$4 median_s=$("$gloo" 0 "$2" "$store" "$3" "$4" "$5")" |
    tee -a "$results"
  wait
  rm -rf "$store"
}

echo "device.sh: $(nproc) CPUs, $(date -u +%FT%TZ), $("$bin/symmesh" --version 2>/dev/null || true)" |
  tee -a "$results"

# The fused operators, 2 nodes x 1 PE, the daemons' default threads.
up 2 1 4GiB
"$bin/symmesh" status | head -n 2 | sed 's/^/status: /' | tee -a "$results"
for shape in "${shapes[@]}"; do
  read -r m k n <<<"$shape"
  for op in matmul-reduce-scatter gemm-allreduce allgather-matmul; do
    job "fused-$op-${m}x${k}x${n}" submit matmul --op "$op" --m "$m" --k "$k" --n "$n" \
      --dtype bf16 --mode both --iters "$mode_iters"
    job "auto-$op-${m}x${k}x${n}" submit matmul --op "$op" --m "$m" --k "$k" --n "$n" \
      --dtype bf16 --mode auto --iters "$mode_iters"
  done
done
down

# Collectives and MoE at each layout, next to Gloo and torch.distributed gloo.
for layout in "${layouts[@]}"; do
  read -r nodes ranks <<<"$layout"
  pes=$((nodes * ranks))
  up "$nodes" "$ranks" 2GiB
  tag="${nodes}x${ranks}"
  job "$tag-barrier" submit barrier --iters 2000
  for bytes in 65536 1048576 "$big"; do
    job "$tag-allreduce-$bytes" submit collective --op allreduce --bytes "$bytes" --dtype f32 \
      --iters 50 --verify
  done
  for kind in dispatch combine; do
    job "$tag-$kind" submit "$kind" --tokens "$tokens" --hidden "$hidden" --topk "$topk" \
      --experts "$experts" --iters "$iters" --verify
  done
  down
  gloo "$tag-barrier" "$pes" barrier 0 2000
  for bytes in 65536 1048576 "$big"; do gloo "$tag-allreduce-$bytes" "$pes" allreduce "$bytes" 20; done
  echo "$tag-moe $("$python" bench/peers/torch_gloo_moe.py "$pes" "$tokens" "$hidden" "$topk" \
    "$experts" "$iters" "${SYMMESH_BENCH_TORCH_PORT:-29611}" 2>&1 | tail -n 1)" | tee -a "$results"
done
echo "device.sh: done $(date -u +%FT%TZ)" | tee -a "$results"
