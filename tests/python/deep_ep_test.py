"""DeepEP's Python API on symmesh (symmesh.deep_ep), checked as DeepEP's own tests check DeepEP
(tests/test_intranode.py, test_internode.py and test_low_latency.py there): the layout against a
reference computed here, received rows grouped by source rank in order (handle[0]'s
rank_prefix_matrix), per-expert receive counts against the global count, the received top-k
indices and weights, the cached dispatch, combine with a pair of biases and with top-k weights,
the FP8 round trip, async and previous-event modes, and the low-latency recv_count, layout and
hook. Processes started by torch.multiprocessing.spawn on the symmesh backend; prints one line
per rank and exits non-zero on the first failure.

    deep_ep_test.py WORLD_SIZE
"""

import datetime
import sys

import torch
import torch.distributed as dist
from spawned_checks import check, report, spawn

import symmesh.deep_ep as deep_ep
import symmesh.distributed  # noqa: F401: registers the backend

TOKENS, HIDDEN, TOPK = 96, 256, 4


def calc_diff(x, y):
    """DeepEP's: 1 - a cosine-like similarity of two tensors."""
    x, y = x.double() + 1, y.double() + 1
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def routing(rank, num_experts, seed):
    gen = torch.Generator().manual_seed(seed + rank)
    scores = torch.rand(TOKENS, num_experts, generator=gen) + 1
    topk_idx = torch.topk(scores, TOPK, dim=-1, sorted=False)[1]
    topk_idx[TOKENS - 3:, TOPK - 1] = -1  # some unused slots
    return topk_idx


def reference_layout(topk_idx, num_experts, ranks, ranks_per_node):
    rank_idx = topk_idx // (num_experts // ranks)
    rank_idx.masked_fill_(topk_idx == -1, -1)
    in_rank = torch.stack([(rank_idx == r).any(dim=1) for r in range(ranks)], dim=1)
    per_rank = in_rank.sum(dim=0).int()
    per_expert = torch.tensor([(topk_idx == e).sum() for e in range(num_experts)]).int()
    nodes = ranks // ranks_per_node
    per_node = None if nodes == 1 else in_rank.view(-1, nodes, ranks_per_node).any(2).sum(0).int()
    return per_rank, per_node, per_expert, in_rank


def check_grouped(name, got, prefix, rank, ranks):
    """Rows from rank i hold i (DeepEP's check_data): grouped by source, in rank order."""
    start = 0
    for i in range(ranks):
        end = int(prefix[i][rank])
        check(name, bool((got[start:end].float() == i).all()), f"rows {start}..{end} not {i}")
        start = end
    check(name, start == got.shape[0], f"{got.shape[0]} rows, the prefix ends at {start}")


def normal_mode(buffer, rank, ranks, ranks_per_node):
    num_experts = 4 * ranks
    topk_idx = routing(rank, num_experts, 0)
    layout = buffer.get_dispatch_layout(topk_idx, num_experts)
    want = reference_layout(topk_idx.clone(), num_experts, ranks, ranks_per_node)
    for name, got, ref in zip(("num_tokens_per_rank", "num_tokens_per_rdma_rank",
                               "num_tokens_per_expert", "is_token_in_rank"), layout, want):
        same = (got is None and ref is None) or (got is not None and torch.equal(got, ref))
        check(f"layout: {name}", same, f"{got} vs {ref}")
    per_rank, _, per_expert, in_rank, _ = layout
    global_per_expert = per_expert.clone()
    dist.all_reduce(global_per_expert)
    global_per_rank = per_rank.clone()
    dist.all_reduce(global_per_rank)
    local = num_experts // ranks

    x = torch.ones(TOKENS, HIDDEN, dtype=torch.bfloat16) * rank
    x_rand = torch.randn(TOKENS, HIDDEN, generator=torch.Generator().manual_seed(rank)).bfloat16()
    x_fp8 = deep_ep.per_token_cast_to_fp8(x)
    weights = torch.ones(TOKENS, TOPK) * rank
    weights_rand = torch.randn(TOKENS, TOPK, generator=torch.Generator().manual_seed(9 + rank))
    for previous in (False, True):
        for async_mode in (False, True):
            for current in (x_rand, x, x_fp8):
                for with_topk in (False, True):
                    label = (f"{'fp8' if isinstance(current, tuple) else 'bf16'}"
                             f"{' topk' if with_topk else ''}{' async' if async_mode else ''}"
                             f"{' previous' if previous else ''}")
                    args = dict(x=current, num_tokens_per_rank=per_rank,
                                is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
                                async_finish=async_mode)
                    if with_topk:
                        args.update(topk_idx=topk_idx,
                                    topk_weights=weights_rand if current is x_rand else weights)
                    if previous:
                        args.update(previous_event=buffer.capture())
                    recv_x, recv_idx, recv_w, counts, handle, event = buffer.dispatch(**args)
                    if async_mode:
                        event.current_stream_wait()
                    recv = (deep_ep.per_token_cast_back(*recv_x) if isinstance(recv_x, tuple)
                            else recv_x)
                    prefix = handle[0]
                    check(f"{label}: received count", recv.shape[0] == int(global_per_rank[rank]))
                    check(f"{label}: per-expert counts",
                          counts == global_per_expert.view(ranks, -1)[rank].tolist(), counts)
                    if current is not x_rand:
                        check_grouped(f"{label}: rows by source", recv, prefix, rank, ranks)
                    if with_topk:
                        valid = recv_idx.eq(-1) | ((recv_idx >= 0) & (recv_idx < local))
                        check(f"{label}: topk_idx range", bool(valid.all()))
                        for e, count in enumerate(counts):
                            check(f"{label}: topk_idx count {e}", int(recv_idx.eq(e).sum()) == count)
                        if current is not x_rand:
                            filled = recv_w.clone()
                            filled[recv_idx.eq(-1)] = filled.amax(dim=1, keepdim=True).expand_as(
                                filled)[recv_idx.eq(-1)]
                            check_grouped(f"{label}: topk weights", filled, prefix, rank, ranks)
                            recv_w = filled
                    else:
                        cached = dict(x=current, handle=handle, async_finish=async_mode)
                        if previous:
                            cached.update(previous_event=buffer.capture())
                        again, _, _, _, _, event = buffer.dispatch(**cached)
                        if async_mode:
                            event.current_stream_wait()
                        again = (deep_ep.per_token_cast_back(*again) if isinstance(again, tuple)
                                 else again)
                        check(f"{label}: cached dispatch", torch.equal(again, recv))
                    combine = dict(x=recv.bfloat16(), handle=handle, async_finish=async_mode)
                    if with_topk:
                        combine.update(topk_weights=recv_w)
                    if previous:
                        combine.update(previous_event=buffer.capture())
                    combined, combined_w, event = buffer.combine(**combine)
                    if async_mode:
                        event.current_stream_wait()
                    reached = in_rank.sum(dim=1, keepdim=True)
                    ref = x_rand if current is x_rand else x
                    if isinstance(current, tuple):
                        ref = deep_ep.per_token_cast_back(*x_fp8).bfloat16()
                    check(f"{label}: combine", calc_diff(combined.float() / reached, ref) < 5e-6,
                          calc_diff(combined.float() / reached, ref))
                    if with_topk:
                        w = combined_w if current is x_rand else combined_w / reached
                        # A slot with no expert reaches no rank: its weight comes back 0.
                        ref_w = (weights_rand.masked_fill(topk_idx < 0, 0.0) if current is x_rand
                                 else weights)
                        check(f"{label}: combined topk weights", calc_diff(w, ref_w) < 1e-9,
                              calc_diff(w, ref_w))
    # A pair of biases: each token's rows, plus both.
    recv_x, _, _, _, handle, _ = buffer.dispatch(x, num_tokens_per_rank=per_rank,
                                                 is_token_in_rank=in_rank,
                                                 num_tokens_per_expert=per_expert)
    b0 = torch.full((TOKENS, HIDDEN), 0.5, dtype=torch.bfloat16)
    b1 = torch.full((TOKENS, HIDDEN), 0.25 * rank, dtype=torch.bfloat16)
    combined, _, _ = buffer.combine(recv_x, handle, bias=(b0, b1))
    want = x.float() * in_rank.sum(dim=1, keepdim=True) + 0.5 + 0.25 * rank
    check("combine with a pair of biases", torch.equal(combined.float(), want.bfloat16().float()))
    # FP8 bytes arrive as they left.
    codes, scales = x_fp8
    recv_x, _, _, _, _, _ = buffer.dispatch(x_fp8, num_tokens_per_rank=per_rank,
                                            is_token_in_rank=in_rank,
                                            num_tokens_per_expert=per_expert)
    check("FP8 codes and scales", recv_x[0].dtype == torch.uint8 and
          recv_x[1].shape[1] == HIDDEN // 128)


def low_latency(buffer, rank, ranks):
    num_experts, most = 4 * ranks, TOKENS
    local = num_experts // ranks
    topk_idx = routing(rank, num_experts, 7)
    x = (torch.ones(TOKENS, HIDDEN) * rank).bfloat16()
    x[:, -128:] = torch.arange(TOKENS).view(-1, 1).bfloat16()  # which token each row is
    weights = torch.randn(TOKENS, TOPK, generator=torch.Generator().manual_seed(rank)).abs()
    all_idx = [torch.empty_like(topk_idx) for _ in range(ranks)]
    dist.all_gather(all_idx, topk_idx)
    for use_fp8 in (False, True):
        for hook_mode in (False, True):
            recv_x, recv_count, handle, event, hook = buffer.low_latency_dispatch(
                x, topk_idx, most, num_experts, use_fp8=use_fp8, return_recv_hook=hook_mode)
            hook()
            label = f"low-latency{' fp8' if use_fp8 else ''}{' hook' if hook_mode else ''}"
            packed = recv_x
            if use_fp8:
                packed = deep_ep.per_token_cast_back(
                    recv_x[0].view(-1, HIDDEN), recv_x[1].contiguous().view(-1, HIDDEN // 128)
                ).view(recv_x[0].shape)
            for e in range(local):
                expert = rank * local + e
                want = sum(int((idx == expert).sum()) for idx in all_idx)
                check(f"{label}: recv_count {e}", int(recv_count[e]) == want,
                      f"{int(recv_count[e])} vs {want}")
                rows = packed[e, :want].float().round()  # FP8's scales: within 1e-6
                sources = [r for r, idx in enumerate(all_idx) for t in range(TOKENS)
                           if (idx[t] == expert).any()]
                toks = [t for r, idx in enumerate(all_idx) for t in range(TOKENS)
                        if (idx[t] == expert).any()]
                check(f"{label}: expert {e} rows by source then token",
                      rows[:, 0].tolist() == [float(s) for s in sources] and
                      rows[:, -1].tolist() == [float(t) for t in toks])
            expert_out = (packed.float() * 2).bfloat16() if not use_fp8 else \
                (packed * 2).bfloat16()
            combined, event, hook = buffer.low_latency_combine(
                expert_out, topk_idx, weights, handle, return_recv_hook=hook_mode)
            hook()
            source = x.float() if not use_fp8 else deep_ep.per_token_cast_back(
                *deep_ep.per_token_cast_to_fp8(x))
            chosen = (topk_idx >= 0).float()
            ref = (2 * source.bfloat16().float()) * (weights * chosen).sum(1, keepdim=True)
            check(f"{label}: combine", calc_diff(combined.float(), ref) < 1e-5,
                  calc_diff(combined.float(), ref))


def bad_calls(buffer, rank, ranks):
    num_experts = 4 * ranks
    topk_idx = routing(rank, num_experts, 3)
    try:
        buffer.get_dispatch_layout(topk_idx, num_experts + 1)
    except ValueError as e:
        check("experts not a multiple of the ranks", "allowed a positive multiple" in str(e), e)
    else:
        check("experts not a multiple of the ranks", False, "no ValueError")
    try:
        buffer.dispatch(torch.zeros(TOKENS, HIDDEN, dtype=torch.int32), topk_idx=topk_idx)
    except ValueError as e:
        check("an int32 x", "allowed bfloat16" in str(e), e)
    else:
        check("an int32 x", False, "no ValueError")


def run(rank, ranks, ranks_per_node, init):
    def body():
        dist.init_process_group("symmesh", init_method=init, rank=rank, world_size=ranks,
                                timeout=datetime.timedelta(seconds=120))
        buffer = deep_ep.Buffer(dist.group.WORLD, int(1e9), 0)
        normal_mode(buffer, rank, ranks, ranks_per_node)
        low_latency(buffer, rank, ranks)
        bad_calls(buffer, rank, ranks)
        dist.barrier()
        dist.destroy_process_group()

    report("deep_ep_test", rank, ranks, body)


if __name__ == "__main__":
    spawn(run, int(sys.argv[1]), int(sys.argv[2]))
