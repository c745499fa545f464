"""The Python API's figures, run by bench/attach.sh under `symmesh launch` (one process per PE):

  moe        dispatch + combine through symmesh (bf16 torch tensors, the experts the identity),
             in private memory and with every tensor on the heap;
             each call alone with its large input (x, the expert rows) in private memory and on
             the heap, and with its output (recv_x, the combined tokens) on the heap too; and
             the same exchange with torch.distributed's gloo backend:
             all_to_all_single of each token to every PE holding one of its experts, and back,
             summed at home
  allreduce  all_reduce of a float32 tensor on the symmetric heap (zero-copy)

Each iteration starts with a barrier and is timed on every PE; an iteration's time is the
slowest PE's. The first WARMUP iterations of each loop are not counted: a process's first calls
fault in fresh pages for every output until glibc's malloc keeps the freed ones (about four calls
at this shape), and the figures are for a process past that, as a serving or training loop is.
Rank 0 prints one line per figure: name, then the median over the iterations in seconds.
Usage: attach_bench.py moe TOKENS HIDDEN TOPK EXPERTS ITERS GLOO_PORT
       attach_bench.py allreduce BYTES ITERS
"""

import statistics
import sys
import time

import torch
import torch.distributed as dist

import symmesh
from peers.torch_gloo_moe import gloo_exchange as peer_gloo_exchange  # bench/ is on sys.path

WARMUP = 5


def slowest(s, seconds):
    t = torch.tensor([seconds], dtype=torch.float32)
    s.all_reduce(t, op="max")
    return float(t[0])


def timed(s, kept, i, call):
    """call() after a barrier; past the warm-up, keeps the slowest PE's seconds in `kept`."""
    s.barrier()
    start = time.perf_counter()
    result = call()
    seconds = slowest(s, time.perf_counter() - start)
    if i >= WARMUP:
        kept.append(seconds)
    return result


def report(s, name, times):
    if s.rank == 0:
        print(f"{name} {statistics.median(times):.6f}", flush=True)


def routing(rank, tokens, topk, experts):
    generator = torch.Generator().manual_seed(rank)
    scores = torch.rand(tokens, experts, generator=generator)
    weights, idx = torch.topk(scores, topk, dim=-1)
    return idx, (weights / weights.sum(dim=-1, keepdim=True)).float()


def bench_moe(s, tokens, hidden, topk, experts, iters, gloo_port):
    torch.set_num_threads(1)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(s.rank)).bfloat16()
    idx, weights = routing(s.rank, tokens, topk, experts)
    def dispatch_combine():
        recv_x, _, _, handle = s.dispatch(x, idx, weights, experts)
        return s.combine(recv_x, handle)

    times = []
    for i in range(WARMUP + iters):
        y = timed(s, times, i, dispatch_combine)
    report(s, "symmesh_dispatch_combine", times)

    # The same with every tensor on the heap: x, recv_x in a room (the rows the experts, x 1,
    # hand back) and the combined tokens.
    x_on_heap = s.empty((tokens, hidden), dtype="bfloat16", like="torch")
    x_on_heap.copy_(x)
    rows_heap = s.empty((tokens * s.world_size, hidden), dtype="bfloat16", like="torch")
    out_heap = s.empty((tokens, hidden), dtype="bfloat16", like="torch")
    recv_heap = s.empty((tokens * s.world_size, hidden), dtype="bfloat16", like="torch")
    def dispatch_combine_heap():
        recv_x, _, _, handle = s.dispatch(x_on_heap, idx, weights, experts, out=recv_heap)
        return s.combine(recv_x, handle, out=out_heap)

    times = []
    for i in range(WARMUP + iters):
        y_heap = timed(s, times, i, dispatch_combine_heap)
    report(s, "symmesh_dispatch_combine_heap", times)
    if not torch.equal(y_heap, y):
        print(f"attach_bench: rank {s.rank}: the heap path gave other sums", file=sys.stderr)
        sys.exit(1)

    # Each call alone, its large input (x, the expert rows) in private memory or on the heap
    # (read there, not copied in), alternated; the experts (x 1) write one or the other. And
    # each with its output on the heap too (written there, not copied out).
    alone = {name: [] for name in ("dispatch_private_x", "dispatch_heap_x", "dispatch_heap_x_out",
                                   "combine_private_rows", "combine_heap_rows",
                                   "combine_heap_rows_out")}
    for i in range(WARMUP + iters):
        timed(s, alone["dispatch_private_x"], i, lambda: s.dispatch(x, idx, weights, experts))
        timed(s, alone["dispatch_heap_x_out"], i,
              lambda: s.dispatch(x_on_heap, idx, weights, experts, out=recv_heap))
        recv_x, _, _, handle = timed(s, alone["dispatch_heap_x"], i,
                                     lambda: s.dispatch(x_on_heap, idx, weights, experts))
        rows = torch.mul(recv_x, 1.0)
        rows_on_heap = torch.mul(recv_x, 1.0, out=rows_heap[:len(recv_x)])
        timed(s, alone["combine_private_rows"], i, lambda: s.combine(rows, handle))
        timed(s, alone["combine_heap_rows"], i, lambda: s.combine(rows_on_heap, handle))
        timed(s, alone["combine_heap_rows_out"], i,
              lambda: s.combine(rows_on_heap, handle, out=out_heap))
    for name, times in alone.items():
        report(s, "symmesh_" + name, times)
    s.free(recv_heap)
    s.free(out_heap)
    s.free(rows_heap)
    s.free(x_on_heap)

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{gloo_port}", rank=s.rank,
                            world_size=s.world_size)
    # Each token once to every PE holding one of its experts: the same tokens symmesh moves.
    gloo_exchange = peer_gloo_exchange(x, idx, s.world_size, experts)

    times = []
    for i in range(WARMUP + iters):
        y_gloo = timed(s, times, i, gloo_exchange)
    report(s, "gloo_alltoall_dispatch_combine", times)
    if not torch.allclose(y.float(), y_gloo, rtol=1e-2, atol=1e-2):
        print(f"attach_bench: rank {s.rank}: symmesh and gloo disagree", file=sys.stderr)
        sys.exit(1)
    dist.destroy_process_group()


def bench_allreduce(s, nbytes, iters):
    t = s.empty(nbytes // 4, dtype="float32", like="torch")
    t.fill_(1.0)
    times = []
    for i in range(WARMUP + iters):
        timed(s, times, i, lambda: s.all_reduce(t))
    report(s, "symmesh_api_allreduce", times)
    s.free(t)


def main():
    s = symmesh.attach()
    if sys.argv[1] == "moe":
        bench_moe(s, *(int(a) for a in sys.argv[2:8]))
    else:
        bench_allreduce(s, int(sys.argv[2]), int(sys.argv[3]))
    s.close()


if __name__ == "__main__":
    main()
