"""MoE dispatch + combine as torch.distributed's gloo backend does it, the peer of symmesh's
dispatch and combine jobs: every rank routes its tokens (top-k of random scores, seeded by the
rank), sends each token once to every rank holding one of its experts (all_to_all_single with
unequal splits), gets the rows back the same way and sums them at home. An iteration starts
after a barrier and counts the slowest rank's time; rank 0 prints the median.
Usage: torch_gloo_moe.py RANKS TOKENS HIDDEN TOPK EXPERTS ITERS PORT
Prints: torch_gloo_moe ranks=R tokens=T hidden=H median_s=S
bench/attach_bench.py runs the same exchange (gloo_exchange) next to symmesh's calls.
"""

import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WARMUP = 2


def gloo_exchange(x, idx, ranks, experts):
    """In an initialised gloo process group: exchanges the counts once, then returns the
    timed part, a call that sends each token of x (bf16, [tokens][hidden]) once to every rank
    holding one of its experts (idx: [tokens][topk]), gets the rows back and sums them at home
    (f32)."""
    tokens, hidden = x.shape
    to_rank = torch.zeros(tokens, ranks, dtype=torch.bool)
    to_rank[torch.arange(tokens).unsqueeze(1), idx // (experts // ranks)] = True
    order = [to_rank[:, r].nonzero().flatten() for r in range(ranks)]
    send_rows = torch.cat(order)
    send_counts = torch.tensor([len(o) for o in order])
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    words = hidden // 2  # bf16 rows as float32 words: gloo moves float32

    def exchange():
        sent = x[send_rows].view(torch.float32)
        received = torch.empty(int(recv_counts.sum()), words, dtype=torch.float32)
        dist.all_to_all_single(received, sent, recv_counts.tolist(), send_counts.tolist())
        back = torch.empty(len(send_rows), words, dtype=torch.float32)
        dist.all_to_all_single(back, received, send_counts.tolist(), recv_counts.tolist())
        summed = torch.zeros(tokens, hidden, dtype=torch.float32)
        return summed.index_add_(0, send_rows, back.view(torch.bfloat16).float())

    return exchange


def run(rank, ranks, tokens, hidden, topk, experts, iters, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=ranks)
    generator = torch.Generator().manual_seed(rank)
    scores = torch.rand(tokens, experts, generator=generator)
    idx = torch.topk(scores, topk, dim=-1).indices
    x = torch.randn(tokens, hidden, generator=generator).to(torch.bfloat16)
    exchange = gloo_exchange(x, idx, ranks, experts)

    times = []
    for i in range(WARMUP + iters):
        dist.barrier()
        start = time.perf_counter()
        exchange()
        slowest = torch.tensor([time.perf_counter() - start])
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if i >= WARMUP:
            times.append(float(slowest[0]))
    if rank == 0:
        print(f"torch_gloo_moe ranks={ranks} tokens={tokens} hidden={hidden} "
              f"median_s={statistics.median(times):.6f}", flush=True)
    dist.destroy_process_group()


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    ranks, tokens, hidden, topk, experts, iters, port = map(int, sys.argv[1:])
    mp.spawn(run, args=(ranks, tokens, hidden, topk, experts, iters, port), nprocs=ranks)


if __name__ == "__main__":
    main()
