"""torch.distributed on symmesh: `import symmesh.distributed` registers the backend "symmesh".

    import symmesh.distributed
    dist.init_process_group("symmesh", rank=r, world_size=w)   # any init_method torch takes

Every torch.distributed call on CPU tensors of that group, and of the groups new_group makes from
it, then runs on symmesh. The process attaches to its node's daemon as its PE: as `symmesh
launch` says when launch started it, else through SYMMESH_DAEMON and SYMMESH_SECRET_FILE (rank r
is local rank r % R of node r // R, R the PEs per node; rank 0 starts the session).
destroy_process_group() detaches, so a program may init and destroy again. The world size must
be the cluster's nodes times PEs per node.

Which path each call takes, and what is not supported, is in docs/OPERATIONS.md ("torch
.distributed and DeepEP programs").
"""

import atexit

import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

from ._attached import Attached, attach
from ._process_group import ProcessGroupSymmesh

__all__ = ["ProcessGroupSymmesh", "session"]

_state = {"pe": None, "generation": 0}


def _create(options, pg_options=None):
    if pg_options is not None:
        raise ValueError("the symmesh backend takes no pg_options")
    timeout = options.timeout
    ranks = list(options.global_ranks_in_group)
    if not ranks:  # the default group: attach this process
        if _state["pe"] is not None:
            raise RuntimeError("this process is already attached: destroy_process_group() first")
        generation = _state["generation"]
        _state["generation"] += 1
        native = attach(options.group_rank, options.group_size, options.store, generation,
                        timeout.total_seconds())
        _state["pe"] = Attached(native, options.group_rank, options.group_size,
                                timeout.total_seconds())
        ranks = list(range(options.group_size))
    pe = _state["pe"]
    if pe is None:
        raise RuntimeError("new_group with the symmesh backend needs a default group made with "
                           "it: init_process_group('symmesh', ...)")
    return ProcessGroupSymmesh(pe, options.group_rank, options.group_size, ranks,
                               options.group_id or "default", timeout)


def session():
    """This process's PE as a symmesh.Session (the one init_process_group attached), for
    symmesh's own calls beside torch.distributed's: MoE dispatch and combine, the fused ops,
    tensors on the symmetric heap. Every rank makes the same calls in the same order."""
    pe = _state["pe"]
    if pe is None or pe.native is None:
        raise RuntimeError("no symmesh process group: init_process_group('symmesh', ...) first")
    return pe.session()


def _detach():
    pe, _state["pe"] = _state["pe"], None
    if pe is not None:
        pe.close()


_destroy = _c10d.destroy_process_group


def destroy_process_group(group=None):
    """torch's destroy_process_group; destroying the default group also detaches."""
    whole = group is None or group is _c10d.GroupMember.WORLD
    try:
        _destroy(group)
    finally:
        if whole:
            _detach()


_monitored_barrier = _c10d.monitored_barrier


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch's monitored_barrier, which torch gives to gloo alone, on symmesh's groups too."""
    pg = _c10d._get_default_group() if group is None or group is _c10d.GroupMember.WORLD \
        else group
    if isinstance(pg, ProcessGroupSymmesh):
        return pg.monitored_barrier(timeout, wait_all_ranks)
    return _monitored_barrier(group, timeout, wait_all_ranks)


if "SYMMESH" not in dist.Backend._plugins:
    dist.Backend.register_backend("symmesh", _create, extended_api=True)
    for module in (_c10d, dist):
        module.destroy_process_group = destroy_process_group
        module.monitored_barrier = monitored_barrier
    atexit.register(_detach)
