"""DeepEP's Python API (the legacy deep_ep.Buffer) on symmesh, for CPU tensors:

    import symmesh.distributed                    # the torch.distributed backend "symmesh"
    import symmesh.deep_ep as deep_ep
    dist.init_process_group("symmesh", ...)
    buffer = deep_ep.Buffer(dist.group.WORLD, num_nvl_bytes, num_rdma_bytes)
    ... = buffer.get_dispatch_layout(topk_idx, num_experts)
    recv_x, recv_topk_idx, recv_topk_weights, counts, handle, event = buffer.dispatch(x, ...)
    combined_x, combined_topk_weights, event = buffer.combine(expert_out, handle)

What maps to what, and what differs, is in _buffer.py's notes and docs/OPERATIONS.md.
"""

from ._buffer import Buffer, Config
from ._event import EventOverlap
from ._fp8 import from_e4m3, per_token_cast_back, per_token_cast_to_fp8, to_e4m3

__all__ = ["Buffer", "Config", "EventOverlap", "per_token_cast_to_fp8", "per_token_cast_back",
           "to_e4m3", "from_e4m3"]
