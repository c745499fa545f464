"""Routing around ranks left out of a dispatch (Mooncake EP's active_ranks mask): every topk slot
whose expert sits on an inactive rank becomes -1 (no expert), so nothing is sent there, and the
tokens that had experts but are left with none are reported: combine gives them zeros (or just
the bias). The gate weights are not renormalised: a caller that wants that gates over the active
experts before it dispatches."""

import numpy


def mask_routing(topk_idx, num_experts, world_size, active_ranks):
    """(topk_idx with the inactive ranks' experts as -1, a copy; the dropped tokens' indices as
    int64, topk_idx's kind). Slots already -1 and experts outside 0..num_experts-1 are left for
    the dispatch to judge."""
    mask = _mask(active_ranks, world_size)
    is_torch = not isinstance(topk_idx, numpy.ndarray)
    if is_torch:
        import torch

        ids = topk_idx.detach().to(dtype=torch.int64).contiguous().numpy()
    else:
        ids = numpy.ascontiguousarray(topk_idx, dtype=numpy.int64)
    per_rank = int(num_experts) // world_size if world_size > 0 else 0
    masked = ids.copy()
    if per_rank > 0 and int(num_experts) % world_size == 0:
        valid = (ids >= 0) & (ids < int(num_experts))
        rank = numpy.where(valid, ids // per_rank, 0)
        masked[valid & ~mask[rank]] = -1
    dropped = numpy.nonzero((ids >= 0).any(axis=1) & ~(masked >= 0).any(axis=1))[0]
    dropped = dropped.astype(numpy.int64)
    if is_torch:
        return torch.from_numpy(masked), torch.from_numpy(dropped)
    return masked, dropped


def _mask(active_ranks, world_size):
    """active_ranks as a numpy bool array of world_size entries, or ValueError naming it."""
    values = active_ranks.detach().cpu().numpy() if hasattr(active_ranks, "detach") else \
        numpy.asarray(active_ranks)
    if values.ndim != 1 or len(values) != world_size:
        raise ValueError(f"active_ranks has shape {tuple(values.shape)}: allowed one entry per "
                         f"rank ({world_size})")
    if values.dtype != numpy.bool_:
        if not numpy.issubdtype(values.dtype, numpy.integer) or not numpy.isin(values, (0, 1)).all():
            raise ValueError(f"active_ranks holds {values.tolist()}: allowed booleans or 0 and 1")
    return values.astype(bool)
