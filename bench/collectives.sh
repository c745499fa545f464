#!/usr/bin/env bash
# Collectives and barriers, side by side, in one invocation on this machine:
#   allreduce and reduce-scatter of 64 KiB, 1, 16 and 64 MiB f32 (SIZES=) on 2 nodes x 2
#   ranks (TCP between the nodes): symmesh ring, symmesh hier, Gloo (4 processes, TCP
#   transport, ring_chunked allreduce / halving-doubling reduce-scatter) and OpenMPI (4
#   processes, MPI_Allreduce / MPI_Reduce_scatter_block, with its default shared-memory
#   transport and forced onto TCP);
#   the wire's time for each (the bytes that must cross nodes at loopback tcp's measured rate);
#   barrier latency of the three symmesh algorithms next to MPI_Barrier and Gloo's barrier.
# Every figure is the median over RUNS runs (default 5) of each run's median iteration, an
# iteration being timed by its slowest rank. Ratios are symmesh time / peer time (< 1: faster).
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/lib.sh

runs=${RUNS:-5}
sizes=${SIZES:-"64KiB 1MiB 16MiB 64MiB"}
bench_setup

eval "$(SYMMESH_BIN=$bin deploy/local-cluster.sh up --nodes 2 --ranks-per-node 2 \
  --base-port "${SYMMESH_BENCH_PORT:-7700}" --heap-size 768MiB)"
work=$(mktemp -d)
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"; rm -rf "$work"' EXIT

bytes_of() {
  case "$1" in
    *KiB) echo $((${1%KiB} << 10)) ;;
    *MiB) echo $((${1%MiB} << 20)) ;;
    *) echo "$1" ;;
  esac
}
iters_of() { case "$1" in *KiB) echo 200 ;; 1MiB) echo 50 ;; 16MiB) echo 10 ;; *) echo 5 ;; esac; }

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

# The wire's time: what must cross between the two nodes, at the rate loopback tcp streams on
# this machine both ways at once over two streams each way (a node's two PEs), as iperf3
# measures it. Between 2 nodes an all-reduce moves at least its size each way (half as
# reduce-scatter, half as all-gather), a reduce-scatter half its size each way; the kernel
# copies every byte at both ends on the cores the PEs share. A call whose bytes stay in the
# cache can come in a little under a long stream's rate; none gets far below it over tcp.
wire=$(repeat iperf3_gbps "$((${SYMMESH_BENCH_PORT:-7700} + 90))" --bidir --parallel 2)
crossing_bytes() { [[ $1 == allreduce ]] && echo $((2 * $2)) || echo "$2"; }

echo "symmesh bench/collectives.sh: $(date -u +%F), $(nproc) cores, $(uname -r), runs=$runs"
echo "times in ms (median of $runs runs); ratio = symmesh hier time / peer time"
echo "wire: the bytes that must cross nodes at loopback tcp's $(awk -v g="$wire" 'BEGIN { printf "%.2f", g }') GB/s (iperf3, 2 streams each way)"
printf "| %-14s | %-5s | %-12s | %-12s | %-8s | %-8s | %-8s | %-10s | %-9s | %-11s | %-10s | %-10s |\n" \
  op size "symmesh ring" "symmesh hier" gloo "mpi tcp" "mpi shm" "wire" "hier/gloo" "hier/mpi tcp" "hier/mpi shm" "hier/wire"
printf "|%s|\n" "----------------|-------|--------------|--------------|----------|----------|----------|------------|-----------|--------------|--------------|------------"
record_peer collectives.wire_gbps "$wire" GB/s higher
for op in allreduce reduce-scatter; do
  for size in $sizes; do
    bytes=$(bytes_of "$size")
    iters=$(iters_of "$size")
    ring=$(repeat symmesh_time "$op" "$size" ring)
    hier=$(repeat symmesh_time "$op" "$size" hier)
    gloo=$(repeat gloo_time "$op" "$bytes" "$iters")
    mpi_tcp=$(repeat mpi_time tcp "$op" "$bytes" "$iters")
    mpi_shm=$(repeat mpi_time shm "$op" "$bytes" "$iters")
    wire_s=$(awk -v b="$(crossing_bytes "$op" "$bytes")" -v g="$wire" 'BEGIN { print b / (g * 1e9) }')
    printf "| %-14s | %-5s | %12s | %12s | %8s | %8s | %8s | %10s | %9s | %12s | %12s | %10s |\n" \
      "$op" "$size" "$(ms "$ring")" "$(ms "$hier")" "$(ms "$gloo")" "$(ms "$mpi_tcp")" \
      "$(ms "$mpi_shm")" "$(ms "$wire_s")" "$(ratio "$hier" "$gloo")" "$(ratio "$hier" "$mpi_tcp")" \
      "$(ratio "$hier" "$mpi_shm")" "$(ratio "$hier" "$wire_s")"
    key=$op.$size
    record_peer "$key.gloo" "$gloo" s lower
    record_peer "$key.mpi_tcp" "$mpi_tcp" s lower
    record_peer "$key.mpi_shm" "$mpi_shm" s lower
    record "$key.symmesh_ring" "$ring" s lower
    record_peer "$key.wire" "$wire_s" s lower
    record "$key.symmesh_hier" "$hier" s lower "$key.gloo $key.mpi_tcp $key.mpi_shm $key.wire"
  done
done

echo
echo "barrier latency in us (median of $runs runs of 1000 barriers)"
mpi_barrier_tcp=$(repeat mpi_time tcp barrier 0 1000)
mpi_barrier_shm=$(repeat mpi_time shm barrier 0 1000)
gloo_barrier=$(repeat gloo_time barrier 0 1000)
printf "| %-22s | %9s | %14s | %14s |\n" barrier "p50 us" "/ MPI_Barrier tcp" "/ MPI_Barrier shm"
printf "|%s|\n" "------------------------|-----------|-------------------|-------------------"
record_peer barrier.mpi_tcp "$(us "$mpi_barrier_tcp")" us lower
record_peer barrier.mpi_shm "$(us "$mpi_barrier_shm")" us lower
record_peer barrier.gloo "$(us "$gloo_barrier")" us lower
symmesh_barrier() {  # [--algo NAME] -> p50 us
  "$bin/symmesh" submit barrier "$@" --iters 1000 --json | json_field p50_us
}
# "default" is what a job that names no algorithm runs: the one the daemon picks for its
# transports and topology.
for algo in default dissemination kary pull; do
  flags=()
  [[ $algo == default ]] || flags=(--algo "$algo")
  p50=$(repeat symmesh_barrier "${flags[@]}")
  printf "| %-22s | %9.1f | %17s | %17s |\n" "symmesh $algo" "$p50" \
    "$(ratio "$p50" "$(us "$mpi_barrier_tcp")")" "$(ratio "$p50" "$(us "$mpi_barrier_shm")")"
  record "barrier.symmesh_$algo" "$p50" us lower "barrier.mpi_tcp barrier.mpi_shm barrier.gloo"
done
printf "| %-22s | %9s | %17s | %17s |\n" "MPI_Barrier tcp" "$(us "$mpi_barrier_tcp")" "" ""
printf "| %-22s | %9s | %17s | %17s |\n" "MPI_Barrier shm" "$(us "$mpi_barrier_shm")" "" ""
printf "| %-22s | %9s | %17s | %17s |\n" "Gloo barrier (tcp)" "$(us "$gloo_barrier")" "" ""
