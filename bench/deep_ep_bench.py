"""DeepEP's API on symmesh timed against the symmesh API and gloo (bench/deep_ep.sh runs it).

    deep_ep_bench.py WORLD_SIZE TOKENS HIDDEN TOPK EXPERTS ITERS

Spawns WORLD_SIZE processes on the symmesh backend (attached through SYMMESH_DAEMON); rank 0
prints "NAME SECONDS" per figure, each the median over ITERS calls (after 3 to warm up) of the
slowest rank's time, a barrier before each call:
  deep_ep_dispatch_bf16, deep_ep_dispatch_fp8   buffer.dispatch (layout computed before)
  deep_ep_combine                               buffer.combine of the bf16 dispatch's rows
  deep_ep_dispatch_combine                      both, bf16
  symmesh_dispatch_combine                      symmesh.Session's dispatch and combine
  gloo_alltoall_dispatch_combine                the same tokens with all_to_all_single there and
                                                back on a gloo group of the same ranks
"""

import datetime
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WARMUP = 3


def run(rank, world, tokens, hidden, topk, experts, iters, init):
    torch.set_num_threads(1)
    import symmesh.deep_ep as deep_ep
    import symmesh.distributed

    dist.init_process_group("symmesh", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(list(range(world)), backend="gloo")
    buffer = deep_ep.Buffer(dist.group.WORLD, int(1e9), 0)
    s = symmesh.distributed.session()
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(rank)).bfloat16()
    x_fp8 = deep_ep.per_token_cast_to_fp8(x)
    scores = torch.rand(tokens, experts, generator=torch.Generator().manual_seed(100 + rank))
    weights, idx = torch.topk(scores, topk, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).float()
    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, experts)
    layout = dict(num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                  num_tokens_per_expert=per_expert, topk_idx=idx, topk_weights=weights)
    figures = {}

    def timed(name, call):
        kept = []
        for i in range(WARMUP + iters):
            dist.barrier()
            start = time.perf_counter()
            result = call()
            slowest = torch.tensor([time.perf_counter() - start])
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if i >= WARMUP:
                kept.append(float(slowest))
        figures[name] = statistics.median(kept)
        return result

    recv_x, _, _, _, handle, _ = timed("deep_ep_dispatch_bf16",
                                       lambda: buffer.dispatch(x, **layout))
    timed("deep_ep_dispatch_fp8", lambda: buffer.dispatch(x_fp8, **layout))
    timed("deep_ep_combine", lambda: buffer.combine(recv_x, handle))

    def deep_ep_both():
        got, _, _, _, h, _ = buffer.dispatch(x, **layout)
        return buffer.combine(got, h)[0]

    y = timed("deep_ep_dispatch_combine", deep_ep_both)

    def symmesh_both():
        got, _, _, h = s.dispatch(x, idx, weights, experts)
        return s.combine(got, h)

    y_api = timed("symmesh_dispatch_combine", symmesh_both)
    per_pe = experts // world
    to_pe = torch.zeros(tokens, world, dtype=torch.bool)
    to_pe[torch.arange(tokens).unsqueeze(1), idx // per_pe] = True
    order = [to_pe[:, p].nonzero().flatten() for p in range(world)]
    send_rows = torch.cat(order)
    send_counts = torch.tensor([len(o) for o in order])
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=gloo)
    words = hidden // 2  # bf16 rows as float32 words: gloo moves float32

    def gloo_both():
        sent = x[send_rows].view(torch.float32)
        received = torch.empty(int(recv_counts.sum()), words, dtype=torch.float32)
        dist.all_to_all_single(received, sent, recv_counts.tolist(), send_counts.tolist(),
                               group=gloo)
        back = torch.empty(len(send_rows), words, dtype=torch.float32)
        dist.all_to_all_single(back, received, send_counts.tolist(), recv_counts.tolist(),
                               group=gloo)
        summed = torch.zeros(tokens, hidden, dtype=torch.float32)
        return summed.index_add_(0, send_rows, back.view(torch.bfloat16).float())

    y_gloo = timed("gloo_alltoall_dispatch_combine", gloo_both)
    if not (torch.equal(y, y_api) and torch.allclose(y.float(), y_gloo, rtol=1e-2, atol=1e-2)):
        print(f"deep_ep_bench: rank {rank}: the three paths disagree", file=sys.stderr)
        sys.exit(1)
    if rank == 0:
        for name, seconds in figures.items():
            print(f"{name} {seconds:.6f}", flush=True)
    dist.destroy_process_group()


def main():
    world, tokens, hidden, topk, experts, iters = map(int, sys.argv[1:7])
    with tempfile.TemporaryDirectory() as rendezvous:
        mp.spawn(run, args=(world, tokens, hidden, topk, experts, iters,
                            f"file://{rendezvous}/init"), nprocs=world)


if __name__ == "__main__":
    main()
