"""The routing figures DeepEP's get_dispatch_layout returns, computed from topk_idx alone (no
communication): experts are spread evenly, rank r holding [r * E/R, (r + 1) * E/R)."""

import torch


def check_routing(topk_idx, num_experts, ranks):
    if not isinstance(topk_idx, torch.Tensor) or topk_idx.dim() != 2:
        raise ValueError("topk_idx: allowed a 2-dimensional integer tensor [tokens, topk]")
    if topk_idx.dtype.is_floating_point or topk_idx.dtype == torch.bool:
        raise ValueError(f"topk_idx has dtype {topk_idx.dtype}: allowed an integer type (int64)")
    if num_experts <= 0 or num_experts % ranks:
        raise ValueError(f"num_experts {num_experts}: allowed a positive multiple of the "
                         f"{ranks} ranks")
    if topk_idx.numel() and (topk_idx.min() < -1 or topk_idx.max() >= num_experts):
        raise ValueError(f"topk_idx holds {int(topk_idx.min())}..{int(topk_idx.max())}: allowed "
                         f"-1 (no expert) and 0..{num_experts - 1}")


def dispatch_layout(topk_idx, num_experts, ranks, ranks_per_node):
    """(num_tokens_per_rank int32 [R], num_tokens_per_rdma_rank int32 [nodes] or None on one
    node, num_tokens_per_expert int32 [E], is_token_in_rank bool [tokens, R])."""
    check_routing(topk_idx, num_experts, ranks)
    idx = topk_idx.long()
    rank_of = torch.where(idx >= 0, idx // (num_experts // ranks), torch.full_like(idx, -1))
    is_token_in_rank = torch.zeros(idx.shape[0], ranks, dtype=torch.bool)
    rows = torch.arange(idx.shape[0]).unsqueeze(1).expand_as(idx)
    chosen = rank_of >= 0
    is_token_in_rank[rows[chosen], rank_of[chosen]] = True
    num_tokens_per_rank = is_token_in_rank.sum(dim=0, dtype=torch.int32)
    num_tokens_per_expert = torch.bincount(idx[idx >= 0], minlength=num_experts).to(torch.int32)
    nodes = ranks // ranks_per_node
    num_tokens_per_rdma_rank = None
    if nodes > 1:
        in_node = is_token_in_rank.view(-1, nodes, ranks_per_node).any(dim=2)
        num_tokens_per_rdma_rank = in_node.sum(dim=0, dtype=torch.int32)
    return num_tokens_per_rank, num_tokens_per_rdma_rank, num_tokens_per_expert, is_token_in_rank
