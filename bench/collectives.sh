#!/usr/bin/env bash
# Collectives and barriers, side by side, in one invocation on this machine:
#   allreduce and reduce-scatter of 1, 16 and 64 MiB f32 on 2 nodes x 2 ranks (TCP between
#   the nodes): symmesh ring, symmesh hier, Gloo (4 processes, TCP transport, ring_chunked
#   allreduce / halving-doubling reduce-scatter) and OpenMPI (4 processes, MPI_Allreduce /
#   MPI_Reduce_scatter_block, with its default shared-memory transport and forced onto TCP);
#   barrier latency of the three symmesh algorithms next to MPI_Barrier and Gloo's barrier.
# Every figure is the median over RUNS runs (default 5) of each run's median iteration, an
# iteration being timed by its slowest rank. Ratios are symmesh time / peer time (< 1: faster).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-5}
deploy/install-deps.sh --bench
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSYMMESH_BENCH=ON >/dev/null
cmake --build build-bench -j "$(nproc)" >/dev/null
bin=$PWD/build-bench/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

eval "$(SYMMESH_BIN=$bin deploy/local-cluster.sh up --nodes 2 --ranks-per-node 2 \
  --base-port "${SYMMESH_BENCH_PORT:-7700}" --heap-size 768MiB)"
work=$(mktemp -d)
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"; rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
json_field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
bytes_of() { case "$1" in *MiB) echo $((${1%MiB} << 20)) ;; *) echo "$1" ;; esac; }
iters_of() { case "$1" in 1MiB) echo 50 ;; 16MiB) echo 10 ;; *) echo 5 ;; esac; }

symmesh_time() {  # op size algo -> seconds
  "$bin/symmesh" submit collective --op "$1" --bytes "$2" --algo "$3" --iters "$(iters_of "$2")" \
    --json | json_field median_s
}
gloo_time() {  # op bytes iters -> seconds
  local store; store=$(mktemp -d "$work/gloo.XXXX")
  for rank in 1 2 3; do "$bin/gloo_bench" "$rank" 4 "$store" "$1" "$2" "$3" >/dev/null & done
  "$bin/gloo_bench" 0 4 "$store" "$1" "$2" "$3"
  wait
}
mpi_time() {  # transport op bytes iters -> seconds
  local mca=()
  [[ "$1" == tcp ]] && mca=(--mca btl tcp,self --mca btl_tcp_if_include lo)
  mpirun -np 4 "${mca[@]}" "$bin/mpi_bench" "$2" "$3" "$4" 2>/dev/null | tail -n 1
}
repeat() { for _ in $(seq "$runs"); do "$@"; done | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
ms() { awk -v s="$1" 'BEGIN { printf "%.2f", s * 1000 }'; }
us() { awk -v s="$1" 'BEGIN { printf "%.1f", s * 1e6 }'; }

echo "symmesh bench/collectives.sh: $(date -u +%F), $(nproc) cores, $(uname -r), runs=$runs"
echo "times in ms (median of $runs runs); ratio = symmesh hier time / peer time"
printf "| %-14s | %-5s | %-12s | %-12s | %-8s | %-8s | %-8s | %-9s | %-11s | %-10s |\n" \
  op size "symmesh ring" "symmesh hier" gloo "mpi tcp" "mpi shm" "hier/gloo" "hier/mpi tcp" "hier/mpi shm"
printf "|%s|\n" "----------------|-------|--------------|--------------|----------|----------|----------|-----------|--------------|--------------"
for op in allreduce reduce-scatter; do
  for size in 1MiB 16MiB 64MiB; do
    bytes=$(bytes_of "$size")
    iters=$(iters_of "$size")
    ring=$(repeat symmesh_time "$op" "$size" ring)
    hier=$(repeat symmesh_time "$op" "$size" hier)
    gloo=$(repeat gloo_time "$op" "$bytes" "$iters")
    mpi_tcp=$(repeat mpi_time tcp "$op" "$bytes" "$iters")
    mpi_shm=$(repeat mpi_time shm "$op" "$bytes" "$iters")
    printf "| %-14s | %-5s | %12s | %12s | %8s | %8s | %8s | %9s | %11s | %10s |\n" "$op" "$size" \
      "$(ms "$ring")" "$(ms "$hier")" "$(ms "$gloo")" "$(ms "$mpi_tcp")" "$(ms "$mpi_shm")" \
      "$(ratio "$hier" "$gloo")" "$(ratio "$hier" "$mpi_tcp")" "$(ratio "$hier" "$mpi_shm")"
  done
done

echo
echo "barrier latency in us (median of $runs runs of 1000 barriers)"
mpi_barrier_tcp=$(repeat mpi_time tcp barrier 0 1000)
mpi_barrier_shm=$(repeat mpi_time shm barrier 0 1000)
gloo_barrier=$(repeat gloo_time barrier 0 1000)
printf "| %-22s | %9s | %14s | %14s |\n" barrier "p50 us" "/ MPI_Barrier tcp" "/ MPI_Barrier shm"
printf "|%s|\n" "------------------------|-----------|-------------------|-------------------"
for algo in dissemination kary pull; do
  p50=$(repeat sh -c "'$bin/symmesh' submit barrier --algo $algo --iters 1000 --json | grep -o '\"p50_us\":[0-9.e+-]*' | cut -d: -f2")
  printf "| %-22s | %9s | %17s | %17s |\n" "symmesh $algo" "$p50" \
    "$(ratio "$p50" "$(us "$mpi_barrier_tcp")")" "$(ratio "$p50" "$(us "$mpi_barrier_shm")")"
done
printf "| %-22s | %9s | %17s | %17s |\n" "MPI_Barrier tcp" "$(us "$mpi_barrier_tcp")" "" ""
printf "| %-22s | %9s | %17s | %17s |\n" "MPI_Barrier shm" "$(us "$mpi_barrier_shm")" "" ""
printf "| %-22s | %9s | %17s | %17s |\n" "Gloo barrier (tcp)" "$(us "$gloo_barrier")" "" ""
