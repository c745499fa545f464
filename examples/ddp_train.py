"""A plain DistributedDataParallel training loop, on gloo or on symmesh: the backend is the one
line that differs (`import symmesh.distributed` registers "symmesh").

    ddp_train.py --backend symmesh [--world-size 4] [--steps 50] [--save params.pt]
    ddp_train.py --compare [--steps 50]    both backends, one after the other: their parameters
                                           after the last step must agree within 1e-5 (relative)

It starts its processes with torch.multiprocessing.spawn, or runs as one of torchrun's (RANK
and WORLD_SIZE set). On symmesh the processes attach to the cluster at SYMMESH_DAEMON (with
SYMMESH_SECRET_FILE), whose nodes x PEs must be the world size. The model is a 3-layer MLP on
synthetic data, the same on every run: rank r trains on its own seeded batches.
"""

import argparse
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


def model():
    torch.manual_seed(0)  # every rank starts from the same weights, as DDP expects
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(),
                               torch.nn.Linear(256, 256), torch.nn.Tanh(),
                               torch.nn.Linear(256, 8))


def train(rank, world, backend, steps, save, init):
    if backend == "symmesh":
        import symmesh.distributed  # noqa: F401: the one line symmesh needs
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    net = DistributedDataParallel(model())
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + rank)
    for step in range(steps):
        x = torch.randn(32, 64, generator=data)
        y = torch.sin(x[:, :8]) + 0.1 * torch.randn(32, 8, generator=data)
        loss = torch.nn.functional.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        if rank == 0 and (step % 10 == 0 or step == steps - 1):
            print(f"ddp_train: {backend} step {step}: loss {loss.item():.6f}", flush=True)
    if rank == 0 and save:
        torch.save({k: v.detach().clone() for k, v in net.module.state_dict().items()}, save)
    dist.destroy_process_group()


def run(backend, world, steps, save):
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # one of torchrun's processes
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), backend, steps, save,
              "env://")
        return
    with tempfile.TemporaryDirectory() as rendezvous:
        mp.spawn(train, args=(world, backend, steps, save, f"file://{rendezvous}/init"),
                 nprocs=world)


def largest_relative_difference(a, b):
    return max(float((a[k] - b[k]).abs().max() / a[k].abs().max().clamp_min(1e-30)) for k in a)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["gloo", "symmesh"], default="symmesh")
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--save")
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    if not args.compare:
        run(args.backend, args.world_size, args.steps, args.save)
        return 0
    with tempfile.TemporaryDirectory() as out:
        params = {}
        for backend in ("gloo", "symmesh"):
            path = os.path.join(out, f"{backend}.pt")
            run(backend, args.world_size, args.steps, path)
            params[backend] = torch.load(path)
    difference = largest_relative_difference(params["gloo"], params["symmesh"])
    agree = difference <= 1e-5
    print(f"ddp_train: after {args.steps} steps on {args.world_size} ranks the parameters of "
          f"gloo and symmesh differ by at most {difference:.3g} (relative): "
          f"{'agree' if agree else 'DISAGREE'} within 1e-5", flush=True)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
