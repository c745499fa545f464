#!/usr/bin/env bash
# MoE combine (and dispatch) side by side, in one invocation on this machine: DeepEP's benchmark
# shape (hidden 7168, topk 8, 64 experts, TOKENS tokens per PE, default 4096; the heap grows
# with it, 2 GiB per node per 1024 tokens, mostly the flat baseline's slots) on 2 nodes x 2
# ranks, TCP between the nodes: symmesh's hierarchical combine, its flat combine, and OpenMPI's
# MPI_Alltoallv plus a local reduction (4 processes, forced onto TCP, and with its default
# shared-memory transport). Every figure is the median over RUNS runs (default 3) of a job's
# median over ITERS iterations (default 5), an iteration timed by its slowest PE.
# Then decoding (LL_TOKENS tokens per PE, default 128, DeepEP's low-latency benchmark shape):
# the low-latency dispatch and combine, p50 and p99 per call over LL_ITERS calls (default 50),
# against the normal (hierarchical) mode and OpenMPI's Alltoallv at the same shape.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

runs=${RUNS:-3}
iters=${ITERS:-5}
tokens=${TOKENS:-4096}
ll_tokens=${LL_TOKENS:-128}
ll_iters=${LL_ITERS:-50}
hidden=7168 topk=8 experts=64
bench_setup

eval "$(SYMMESH_BIN=$bin deploy/local-cluster.sh up --nodes 2 --ranks-per-node 2 \
  --base-port "${SYMMESH_BENCH_PORT:-7900}" --heap-size "$(((tokens + 1023) / 1024 * 2))GiB")"
work=$(mktemp -d)
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"; rm -rf "$work"' EXIT

field() { json_field "$1" <"$2"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

symmesh_runs() {  # op algo [tokens iters prefix] -> $work/<prefix><op>-<algo>.<run>.json
  for run in $(seq "$runs"); do
    "$bin/symmesh" submit "$1" --algo "$2" --tokens "${3:-$tokens}" --hidden "$hidden" \
      --topk "$topk" --experts "$experts" --iters "${4:-$iters}" --json \
      >"$work/${5:-}$1-$2.$run.json"
  done
}
pick() {  # file-prefix field -> median over runs
  for run in $(seq "$runs"); do field "$2" "$work/$1.$run.json"; done | median
}
mpi_time() {  # transport [tokens iters] -> seconds
  local mca=()
  [[ "$1" == tcp ]] && mca=(--mca btl tcp,self --mca btl_tcp_if_include lo)
  for _ in $(seq "$runs"); do
    mpirun -np 4 "${mca[@]}" "$bin/mpi_moe_bench" "${2:-$tokens}" "$hidden" "$topk" "$experts" \
      "${3:-$iters}" 2>/dev/null | tail -n 1
  done | median
}

symmesh_runs combine hier
symmesh_runs combine flat
symmesh_runs dispatch hier
mpi_tcp=$(mpi_time tcp)
mpi_shm=$(mpi_time shm)

echo "symmesh bench/moe.sh: $(date -u +%F), $(nproc) cores, runs=$runs iters=$iters"
echo "tokens=$tokens per PE, hidden=$hidden, topk=$topk, experts=$experts, bf16, 2 nodes x 2 ranks over TCP"
printf "| %-26s | %9s | %10s | %8s | %15s |\n" "" "median ms" "tokens/s" "GB/s" "inter-node MiB"
printf "|%s|\n" "----------------------------|-----------|------------|----------|-----------------"
for variant in combine-hier combine-flat dispatch-hier; do
  printf "| %-26s | %9s | %10.0f | %8.3f | %15s |\n" "symmesh ${variant/-/ }" \
    "$(ms "$(pick "$variant" median_s)")" "$(pick "$variant" tokens_per_s)" \
    "$(pick "$variant" algbw_gbps)" "$(mib "$(pick "$variant" inter_node_bytes)")"
done
all_tokens=$((tokens * 4))
for transport in tcp shm; do
  t=$([[ $transport == tcp ]] && echo "$mpi_tcp" || echo "$mpi_shm")
  printf "| %-26s | %9s | %10.0f | %8.3f | %15s |\n" "OpenMPI Alltoallv ($transport)" "$(ms "$t")" \
    "$(awk -v n="$all_tokens" -v t="$t" 'BEGIN { print n / t }')" \
    "$(awk -v n="$all_tokens" -v h="$hidden" -v t="$t" 'BEGIN { print n * h * 2 / t / 1e9 }')" \
    "$(mib "$(pick combine-flat flat_inter_node_bytes)")"
done
hier=$(pick combine-hier median_s)
echo
echo "hier / flat time: $(ratio "$hier" "$(pick combine-flat median_s)");" \
  "hier / MPI tcp: $(ratio "$hier" "$mpi_tcp"); hier / MPI shm: $(ratio "$hier" "$mpi_shm");" \
  "hier / flat inter-node bytes: $(ratio "$(pick combine-hier inter_node_bytes)" "$(pick combine-flat inter_node_bytes)")"
record_peer moe.mpi_alltoallv_tcp "$mpi_tcp" s lower
record_peer moe.mpi_alltoallv_shm "$mpi_shm" s lower
record moe.combine_flat "$(pick combine-flat median_s)" s lower
record moe.combine_hier "$hier" s lower "moe.combine_flat moe.mpi_alltoallv_shm"
record moe.dispatch_hier "$(pick dispatch-hier median_s)" s lower "moe.combine_hier moe.mpi_alltoallv_shm"

# Decoding: the low-latency mode against the normal one and MPI at LL_TOKENS tokens per PE.
for op in dispatch combine; do
  for algo in low-latency hier; do symmesh_runs "$op" "$algo" "$ll_tokens" "$ll_iters" ll-; done
done
ll_mpi_tcp=$(mpi_time tcp "$ll_tokens" "$ll_iters")
ll_mpi_shm=$(mpi_time shm "$ll_tokens" "$ll_iters")
echo
echo "decoding: $ll_tokens tokens per PE, $ll_iters calls a run; p50 and p99 per call in ms"
printf "| %-28s | %8s | %8s | %13s | %13s |\n" "" "p50 ms" "p99 ms" "/ normal mode" "/ MPI shm"
printf "|%s|\n" "------------------------------|----------|----------|---------------|---------------"
for op in dispatch combine; do
  normal=$(pick "ll-$op-hier" median_s)
  for algo in low-latency hier; do
    p50=$(pick "ll-$op-$algo" median_s)
    printf "| %-28s | %8s | %8s | %13s | %13s |\n" "symmesh $op $algo" "$(ms "$p50")" \
      "$(pick "ll-$op-$algo" p99_us | awk '{ printf "%.2f", $1 / 1000 }')" \
      "$(ratio "$p50" "$normal")" "$(ratio "$p50" "$ll_mpi_shm")"
  done
done
for transport in tcp shm; do
  t=$([[ $transport == tcp ]] && echo "$ll_mpi_tcp" || echo "$ll_mpi_shm")
  printf "| %-28s | %8s | %8s | %13s | %13s |\n" "OpenMPI Alltoallv ($transport)" "$(ms "$t")" "" \
    "" "$(ratio "$t" "$ll_mpi_shm")"
done
record_peer moe.ll_mpi_alltoallv_shm "$ll_mpi_shm" s lower
record moe.ll_dispatch_hier "$(pick ll-dispatch-hier median_s)" s lower
record moe.ll_combine_hier "$(pick ll-combine-hier median_s)" s lower
record moe.ll_dispatch "$(pick ll-dispatch-low-latency median_s)" s lower \
  "moe.ll_dispatch_hier moe.ll_mpi_alltoallv_shm"
record moe.ll_combine "$(pick ll-combine-low-latency median_s)" s lower \
  "moe.ll_combine_hier moe.ll_mpi_alltoallv_shm"
