#!/usr/bin/env bash
# From a fresh Debian machine to a job run end to end: installs what it needs, builds,
# starts a local cluster of 2 daemons x 2 ranks (TCP between the nodes, shared memory
# inside), runs a barrier, an all-reduce, a fused GEMM + all-reduce and a MoE combine through the
# CLI, prints them, stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"

base_port=${SYMMESH_BASE_PORT:-7400}
echo "== starting a local cluster: 2 nodes x 2 ranks on 127.0.0.1:$base_port.."
eval "$(deploy/local-cluster.sh up --nodes 2 --ranks-per-node 2 --base-port "$base_port")"
trap 'deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"' EXIT

echo "== symmesh status"
build/bin/symmesh status
echo "== symmesh submit barrier --algo pull --iters 1000"
build/bin/symmesh submit barrier --algo pull --iters 1000
echo "== symmesh submit collective --op allreduce --bytes 16MiB --dtype f32 --verify"
build/bin/symmesh submit collective --op allreduce --bytes 16MiB --dtype f32 --iters 10 --verify
echo "== symmesh submit matmul --op gemm-allreduce --m 1024 --n 512 --k 1024 --dtype bf16 --verify"
build/bin/symmesh submit matmul --op gemm-allreduce --m 1024 --n 512 --k 1024 --dtype bf16 \
  --iters 3 --verify
echo "== symmesh submit combine --tokens 256 --hidden 1024 --topk 8 --experts 16 --verify"
build/bin/symmesh submit combine --tokens 256 --hidden 1024 --topk 8 --experts 16 --iters 3 --verify
echo "== logs: $SYMMESH_CLUSTER_DIR; stopping the cluster"
