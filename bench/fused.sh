#!/usr/bin/env bash
# The fused operators against their baselines, in one invocation on this machine:
# matmul-reduce-scatter, gemm-allreduce and allgather-matmul on 2 nodes x 1 rank (TCP between
# the nodes), bf16, at M=4096 K=4096 N=1024 and at PTO's GEMM + AllReduce's M=5416 K=6144 N=1408. For each:
#   symmesh: compute-only (the standalone oneDNN GEMM), comm-only (our collective alone) and
#   its CPU time, sequential (GEMM then collective), pipelined (fused), speedup, overlap
#   efficiency, the fused GEMM's GFLOP/s as a share of the standalone GEMM's;
#   OpenMPI: the same oneDNN GEMM tiles then MPI_Reduce_scatter_block / MPI_Allreduce /
#   MPI_Allgather (2 processes, TCP BTL on loopback), its total time.
# matmul-reduce-scatter runs with pull and with push stages. The jobs run `--mode auto`: both
# modes take turns and the first run of a shape plans (the faster median); the later runs keep
# that plan, so their `auto` time (the chosen mode's median) is not picked from their own noise.
# Every figure is the median over RUNS runs (default 3) of a job's medians over ITERS iterations
# (default 5), an iteration being timed by its slowest rank.
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/lib.sh

runs=${RUNS:-3}
iters=${ITERS:-5}
shapes=${SHAPES:-"4096x4096x1024 5416x6144x1408"}  # MxKxN
bench_setup

eval "$(SYMMESH_BIN=$bin deploy/local-cluster.sh up --nodes 2 --ranks-per-node 1 \
  --base-port "${SYMMESH_BENCH_PORT:-7800}" --heap-size 1GiB)"
work=$(mktemp -d)
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"; rm -rf "$work"' EXIT

field() { json_field "$1" <"$2"; }

echo "symmesh bench/fused.sh: $(date -u +%F), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), runs=$runs iters=$iters"
echo "2 nodes x 1 rank over TCP (loopback), bf16 inputs, f32 accumulation and output; times in ms"
echo "speedup = sequential / pipelined; bound = sequential / (compute + comm CPU), the speedup left"
echo "when both cores already compute and the comm's CPU time cannot hide; GEMM share = the fused"
echo "run's GEMM GFLOP/s / the standalone GEMM's; auto = the mode --mode auto planned (F fused,"
echo "S sequential) and its time; auto x = sequential / auto; vs MPI = OpenMPI total / symmesh auto"
printf "| %-28s | %-14s | %7s | %7s | %8s | %7s | %9s | %7s | %5s | %7s | %10s | %9s | %6s | %7s | %6s |\n" \
  op "shape MxKxN" compute comm "comm CPU" seq pipelined speedup bound overlap "GEMM share" auto "auto x" MPI "vs MPI"
printf "|%s|\n" "------------------------------|----------------|---------|---------|----------|---------|-----------|---------|-------|---------|------------|-----------|--------|---------|--------"
for shape in $shapes; do
  IFS=x read -r m k n <<<"$shape"
  for variant in matmul-reduce-scatter:pull matmul-reduce-scatter:push gemm-allreduce allgather-matmul; do
    op=${variant%%:*}
    transfer=pull
    [[ $variant == *:push ]] && transfer=push
    for run in $(seq "$runs"); do
      "$bin/symmesh" submit matmul --op "$op" --m "$m" --k "$k" --n "$n" --dtype bf16 \
        --transfer "$transfer" --mode auto --iters "$iters" --json >"$work/$run.json"
      mpirun -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo \
        "$bin/mpi_fused_bench" "$op" "$m" "$n" "$k" bf16 "$iters" 2>/dev/null | tail -n 1 >"$work/$run.mpi"
    done
    pick() { for run in $(seq "$runs"); do field "$1" "$work/$run.json"; done | median; }
    # The runs after the planning one (all of them when RUNS is 1).
    kept() { for run in $(seq $((runs > 1 ? 2 : 1)) "$runs"); do field "$1" "$work/$run.json"; done | median; }
    compute=$(pick compute_s) comm=$(pick comm_s) comm_cpu=$(pick comm_cpu_s)
    seq_s=$(pick sequential_s) pipe=$(pick pipelined_s) overlap=$(pick overlap_efficiency)
    share=$(ratio "$(pick fused_gemm_gflops)" "$(pick compute_gflops)")
    mpi=$(for run in $(seq "$runs"); do cut -d' ' -f1 "$work/$run.mpi"; done | median)
    auto=$(kept median_s)
    chosen=$(grep -o '"chosen":"[a-z]*"' "$work/$runs.json" | cut -d'"' -f4)
    label=$op
    [[ $op == matmul-reduce-scatter ]] && label="$op ($transfer)"
    bound=$(awk -v s="$seq_s" -v c="$compute" -v u="$comm_cpu" 'BEGIN { printf "%.2f", s / (c + u) }')
    printf "| %-28s | %-14s | %7s | %7s | %8s | %7s | %9s | %7s | %5s | %7.2f | %10s | %s %7s | %6s | %7s | %6s |\n" \
      "$label" "$shape" "$(ms "$compute")" "$(ms "$comm")" "$(ms "$comm_cpu")" "$(ms "$seq_s")" \
      "$(ms "$pipe")" "$(ratio "$seq_s" "$pipe")" "$bound" "$overlap" "$share" \
      "$([[ $chosen == fused ]] && echo F || echo S)" "$(ms "$auto")" "$(ratio "$seq_s" "$auto")" \
      "$(ms "$mpi")" "$(ratio "$mpi" "$auto")"
    key=fused.$op.$shape
    [[ $op == matmul-reduce-scatter ]] && key=fused.$op-$transfer.$shape
    record_peer "$key.mpi" "$mpi" s lower
    record "$key.sequential" "$seq_s" s lower
    record "$key.bound" "$(awk -v c="$compute" -v u="$comm_cpu" 'BEGIN { print c + u }')" s lower
    record "$key.pipelined" "$pipe" s lower "$key.sequential $key.bound $key.mpi"
    record "$key.auto" "$auto" s lower "$key.sequential $key.mpi"
  done
done
