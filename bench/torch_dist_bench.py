"""torch.distributed's calls timed on one backend (bench/torch_dist.sh runs it for gloo and for
symmesh, round after round, and prints the ratios).

    torch_dist_bench.py BACKEND WORLD_SIZE ITERS

Spawns WORLD_SIZE processes (on symmesh they attach through SYMMESH_DAEMON); rank 0 prints one
line per figure, "NAME SECONDS" (a call's time over ITERS calls back to back, after a barrier):
  all_reduce_<bytes>        float32 SUM on a private tensor, 64 KiB to 64 MiB
  session_all_reduce_<bytes>  symmesh only: the same through symmesh.Session.all_reduce
  heap_all_reduce_<bytes>   symmesh only: dist.all_reduce of a tensor on the symmetric heap
  all_to_all_single_<bytes> equal splits, the tensor's bytes per rank
  broadcast_<bytes>         from rank 0
  ddp_step                  one DDP training step of a 12.6M-parameter MLP (batch 32)
"""

import datetime
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

KIB = 1024
ALL_REDUCE_SIZES = [64 * KIB, 1024 * KIB, 16384 * KIB, 65536 * KIB]
ALL_TO_ALL_SIZES = [1024 * KIB, 16384 * KIB]
BROADCAST_SIZES = [1024 * KIB, 16384 * KIB]


def timed(call, iters):
    """Seconds a call, over `iters` calls back to back after two to warm up and a barrier."""
    for _ in range(2):
        call()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - start) / iters


def ddp_step_time(iters):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 2048))
    net = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(32, 2048), torch.randn(32, 2048)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        optimizer.step()

    return timed(step, iters)


def run(rank, world, backend, iters, init):
    torch.set_num_threads(1)  # as many processes as cores: one thread each
    if backend == "symmesh":
        import symmesh.distributed
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    figures = []
    for size in ALL_REDUCE_SIZES:
        t = torch.ones(size // 4)
        figures.append((f"all_reduce_{size}", timed(lambda: dist.all_reduce(t), iters)))
        if backend == "symmesh":
            s = symmesh.distributed.session()
            figures.append((f"session_all_reduce_{size}", timed(lambda: s.all_reduce(t), iters)))
            on_heap = s.empty(size // 4, dtype="float32", like="torch")
            on_heap.fill_(1.0)
            figures.append((f"heap_all_reduce_{size}",
                            timed(lambda: dist.all_reduce(on_heap), iters)))
            s.free(on_heap)
    for size in ALL_TO_ALL_SIZES:
        src, dst = torch.ones(size // 4), torch.empty(size // 4)
        figures.append((f"all_to_all_single_{size}",
                        timed(lambda: dist.all_to_all_single(dst, src), iters)))
    for size in BROADCAST_SIZES:
        t = torch.ones(size // 4)
        figures.append((f"broadcast_{size}", timed(lambda: dist.broadcast(t, 0), iters)))
    figures.append(("ddp_step", ddp_step_time(iters)))
    if rank == 0:
        for name, seconds in figures:
            print(f"{name} {seconds:.9f}", flush=True)
    dist.destroy_process_group()


def main():
    backend, world, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with tempfile.TemporaryDirectory() as rendezvous:
        mp.spawn(run, args=(world, backend, iters, f"file://{rendezvous}/init"), nprocs=world)


if __name__ == "__main__":
    main()
