"""What the spawned test programs share: a check that stops a rank at its first failure, an
expected error, and the run of one rank that prints "PROGRAM: rank R of W: every check passed"
(or the failure, exiting 1)."""

import sys
import tempfile

import torch.multiprocessing as mp


class Failed(Exception):
    pass


def check(name, ok, detail=""):
    if not ok:
        raise Failed(f"{name} FAILED {detail}")


def expect_error(name, call, kind, words):
    try:
        call()
    except kind as e:
        check(name, words in str(e), f"message: {e}")
        return
    check(name, False, f"no {kind.__name__}")


def report(program, rank, world, body):
    """Runs body() as rank `rank` and says how it went."""
    try:
        body()
    except Failed as e:
        print(f"{program}: rank {rank}: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"{program}: rank {rank} of {world}: every check passed", flush=True)


def spawn(run, world, *args):
    """run(rank, world, *args, init_method) in `world` processes, rendezvous in a fresh folder."""
    with tempfile.TemporaryDirectory() as init_dir:
        mp.spawn(run, args=(world, *args, f"file://{init_dir}/init"), nprocs=world)
