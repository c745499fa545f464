"""deep_ep.Buffer (DeepEP's legacy API) on symmesh's MoE dispatch and combine, for CPU tensors.

The group is the symmesh backend's world group. Every rank makes the same calls in the same
order; ranks are the group's, and rank r holds experts [r * E/R, (r + 1) * E/R).

What DeepEP does on GPUs and what it does here:
  dispatch, combine: symmesh.Session's (hierarchical: a token crosses to a node once), with
    DeepEP's semantics: received tokens ordered by source rank, then token; recv_topk_idx the
    local expert index or -1, recv_topk_weights 0 there; combine sums each token's rows from the
    ranks that received it (and its biases, and the topk_weights it is given) in a fixed order.
    A dispatch also all-gathers every rank's num_tokens_per_rank and num_tokens_per_expert: the
    handle's rank_prefix_matrix (handle[0], as DeepEP's intranode handle has it) and the
    received count per local expert come from them.
  FP8: x = (codes, scales): e4m3fn codes as uint8 [tokens, hidden] (torch 1.13 has no float8
    type) and float32 scales [tokens, hidden / 128]; each token's codes and scales travel as
    one row (hidden + hidden / 32 bytes, padded to 16: 0.56x a bf16 row). A pair made by
    per_token_cast_to_fp8 is already those rows; any other is copied into them.
  low_latency_dispatch / low_latency_combine: DeepEP's layout (recv_x [local experts,
    max tokens x ranks, hidden], recv_count) over the same dispatch and combine. DeepEP's
    low-latency dispatch takes no gate weights and its combine does, so the combine first
    sends each token's weights to the ranks of its experts (a dispatch of [tokens, topk]
    float32), each rank sums its experts' weighted rows in float32, and those float32 rows are
    combined and rounded once. (symmesh.Session.low_latency_dispatch takes the weights at
    dispatch and needs none of that.)
  async_finish=True: the call runs on a thread of its own and returns at once, its event
    waiting for it (EventOverlap.current_stream_wait); return_recv_hook=True: the hook waits.
    Its outputs are allocated before it starts, so a dispatch whose received count is not yet
    known (a normal dispatch without a handle) waits for the count, which symmesh learns with
    the data: that one returns when done. Calls keep the program's order on every rank.
  Knobs that mean nothing on a CPU are taken and ignored: num_nvl_bytes, num_rdma_bytes,
    num_qps_per_rank, allow_nvlink_for_low_latency_mode, Config's SM counts and chunk sizes,
    allocate_on_comm_stream, expert_alignment's padding is applied to the counts only (as
    DeepEP's num_recv_tokens_per_expert_list).
"""

import torch
import torch.distributed as dist

from ..distributed import ProcessGroupSymmesh, _state
from . import _fp8
from ._event import EventOverlap
from ._layout import check_routing, dispatch_layout


class Config:
    """DeepEP's performance config: kept, and ignored (no SMs or NVLink chunks on a CPU)."""

    def __init__(self, num_sms=20, num_max_nvl_chunked_send_tokens=6,
                 num_max_nvl_chunked_recv_tokens=256, num_max_rdma_chunked_send_tokens=6,
                 num_max_rdma_chunked_recv_tokens=128):
        self.num_sms = num_sms
        self.num_max_nvl_chunked_send_tokens = num_max_nvl_chunked_send_tokens
        self.num_max_nvl_chunked_recv_tokens = num_max_nvl_chunked_recv_tokens
        self.num_max_rdma_chunked_send_tokens = num_max_rdma_chunked_send_tokens
        self.num_max_rdma_chunked_recv_tokens = num_max_rdma_chunked_recv_tokens

    def get_nvl_buffer_size_hint(self, hidden_bytes, num_ranks):
        return 0

    def get_rdma_buffer_size_hint(self, hidden_bytes, num_ranks):
        return 0


class Handle(tuple):
    """A dispatch's handle: handle[0] is rank_prefix_matrix ([R, R] int32: entry [i][j] is how
    many tokens ranks 0..i sent rank j), handle[1] is_token_in_rank; the rest is symmesh's."""

    def __new__(cls, rank_prefix_matrix, is_token_in_rank, native, topk_idx, num_experts,
                tokens, received):
        handle = super().__new__(cls, (rank_prefix_matrix, is_token_in_rank))
        handle.native, handle.topk_idx, handle.num_experts = native, topk_idx, num_experts
        handle.tokens, handle.received = tokens, received
        return handle


class LowLatencyHandle(tuple):
    """A low-latency dispatch's handle: (recv_count, max tokens per rank, hidden, experts)
    and symmesh's dispatch under it."""

    def __new__(cls, recv_count, max_tokens, hidden, num_experts, normal, rows):
        handle = super().__new__(cls, (recv_count, max_tokens, hidden, num_experts))
        handle.max_tokens, handle.hidden, handle.num_experts = max_tokens, hidden, num_experts
        handle.normal = normal  # the Handle of the dispatch carrying the tokens
        handle.rows = rows  # per local expert: the received rows that chose it, in order
        return handle


def _pack(x, what):
    """x (a tensor, or DeepEP's FP8 pair) as the rows a dispatch moves, and how to unpack them."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(f"{what}: an FP8 x is a pair (codes, scales)")
        codes, scales = x
        if codes.dtype != torch.uint8 or codes.dim() != 2 or codes.shape[1] % 128:
            raise ValueError(f"{what}: FP8 codes must be uint8 [tokens, hidden], hidden a "
                             f"multiple of 128 (e4m3fn bytes; torch 1.13 has no float8 type)")
        tokens, hidden = codes.shape
        if scales.dtype != torch.float32 or tuple(scales.shape) != (tokens, hidden // 128):
            raise ValueError(f"{what}: FP8 scales must be float32 [{tokens}, {hidden // 128}]")
        rows = _fp8.packed_rows(codes, scales)
        if rows is None:  # codes and scales of their own: one copy into the rows
            padding = torch.zeros(tokens, _fp8.row_bytes(hidden) - hidden - hidden // 32,
                                  dtype=torch.uint8)
            rows = torch.cat([codes, scales.contiguous().view(torch.uint8), padding], dim=1)
        return rows.view(torch.float16), ("fp8", hidden)
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"{what}: x must be a [tokens, hidden] tensor or an FP8 pair")
    if x.dtype not in (torch.bfloat16, torch.float32, torch.float16):
        raise ValueError(f"{what}: x has dtype {x.dtype}: allowed bfloat16 (float32, float16), "
                         f"or an FP8 pair")
    return x.contiguous(), ("plain", x.shape[1])


def _padded(rows):
    """rows widened with zero columns to a multiple of 8 (the width symmesh's MoE calls take)."""
    extra = -rows.shape[1] % 8
    if extra == 0:
        return rows.contiguous()
    return torch.nn.functional.pad(rows, (0, extra)).contiguous()


def _unpack(rows, kind):
    form, hidden = kind
    if form == "plain":
        return rows
    raw = rows.view(torch.uint8)
    # Views, not copies: an async call fills them after they are handed out.
    return raw[:, :hidden], raw[:, hidden:hidden + hidden // 32].view(torch.float32)


def _rows_like(kind, received, dtype):
    form, hidden = kind
    if form == "fp8":
        return torch.empty(received, _fp8.row_bytes(hidden) // 2, dtype=torch.float16)
    return torch.empty(received, hidden, dtype=dtype)


class Buffer:
    num_sms = 20

    def __init__(self, group, num_nvl_bytes=0, num_rdma_bytes=0, low_latency_mode=False,
                 num_qps_per_rank=24, allow_nvlink_for_low_latency_mode=True,
                 allow_mnnvl=False, explicitly_destroy=False):
        if not isinstance(group, ProcessGroupSymmesh):
            raise ValueError(f"deep_ep.Buffer: the group is a {type(group).__name__}: allowed a "
                             f"group of the symmesh backend (init_process_group('symmesh'))")
        if group.size() != dist.get_world_size():
            raise ValueError("deep_ep.Buffer: symmesh's dispatch and combine run over the whole "
                             "world: allowed the default group")
        self.group, self.rank, self.group_size = group, group.rank(), group.size()
        self.num_nvl_bytes, self.num_rdma_bytes = num_nvl_bytes, num_rdma_bytes
        self.low_latency_mode = low_latency_mode
        self._pe = _state["pe"]
        self._session = self._pe.session()
        self._ranks_per_node = self._session.local_size
        self._destroyed = False

    # -- static parts of DeepEP's API ----------------------------------------------------------

    @staticmethod
    def set_num_sms(new_num_sms):
        Buffer.num_sms = new_num_sms

    @staticmethod
    def capture():
        return EventOverlap()

    @staticmethod
    def get_dispatch_config(num_ranks):
        return Config(Buffer.num_sms)

    @staticmethod
    def get_combine_config(num_ranks):
        return Config(Buffer.num_sms)

    @staticmethod
    def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks,
                                       num_experts):
        """What DeepEP's buffer would take (bf16, two halves); symmesh sizes its own."""
        return 2 * 2 * num_max_dispatch_tokens_per_rank * num_ranks * (hidden * 2 + 64)

    def clean_low_latency_buffer(self, num_max_dispatch_tokens_per_rank, hidden, num_experts):
        """Nothing to clean: symmesh's calls never leave a buffer they need zeroed."""

    def destroy(self):
        self._destroyed = True

    def get_local_buffer_tensor(self, *args, **kwargs):
        raise NotImplementedError("get_local_buffer_tensor hands out DeepEP's GPU buffer; on "
                                  "symmesh make heap tensors with symmesh.distributed.session()"
                                  ".empty(...)")

    # -- layout ----------------------------------------------------------------------------------

    def get_dispatch_layout(self, topk_idx, num_experts, previous_event=None, async_finish=False,
                            allocate_on_comm_stream=False):
        self._wait(previous_event)
        per_rank, per_node, per_expert, in_rank = dispatch_layout(
            topk_idx, num_experts, self.group_size, self._ranks_per_node)
        return per_rank, per_node, per_expert, in_rank, EventOverlap()

    # -- normal mode -----------------------------------------------------------------------------

    def dispatch(self, x, handle=None, num_tokens_per_rank=None, num_tokens_per_rdma_rank=None,
                 is_token_in_rank=None, num_tokens_per_expert=None, topk_idx=None,
                 topk_weights=None, expert_alignment=1, config=None, previous_event=None,
                 async_finish=False, allocate_on_comm_stream=False):
        self._check_alive()
        rows, kind = _pack(x, "dispatch")
        self._wait(previous_event)
        if handle is not None:
            if topk_idx is not None or topk_weights is not None:
                raise ValueError("dispatch with a handle (cached): the routing is the handle's; "
                                 "pass no topk_idx or topk_weights")
            return self._cached_dispatch(rows, kind, handle, async_finish)
        if num_tokens_per_rank is None or is_token_in_rank is None or num_tokens_per_expert is None:
            raise ValueError("dispatch without a handle needs num_tokens_per_rank, "
                             "is_token_in_rank and num_tokens_per_expert (get_dispatch_layout)")
        num_experts = int(num_tokens_per_expert.numel())
        tokens = rows.shape[0]
        idx, weights = self._routing(topk_idx, topk_weights, is_token_in_rank, num_experts,
                                     tokens)
        self._pe.drain()
        counts = self._gathered_counts(num_tokens_per_rank, num_tokens_per_expert)
        rank_prefix_matrix = counts[:, :self.group_size].cumsum(0).to(torch.int32)
        local = num_experts // self.group_size
        mine = counts[:, self.group_size + self.rank * local:
                      self.group_size + (self.rank + 1) * local].sum(0)
        per_expert = [int(-(-int(c) // expert_alignment) * expert_alignment) for c in mine]
        recv_rows, recv_idx, recv_weights, native = self._session.dispatch(rows, idx, weights,
                                                                           num_experts)
        expected = int(rank_prefix_matrix[-1, self.rank])
        if native.num_received != expected:
            raise RuntimeError(f"dispatch: {native.num_received} tokens arrived, but the ranks' "
                               f"num_tokens_per_rank say {expected}: every rank must pass the "
                               f"layout of its own topk_idx")
        out = Handle(rank_prefix_matrix, is_token_in_rank, native, idx, num_experts, tokens,
                     native.num_received)
        recv_x = _unpack(recv_rows, kind)
        if topk_idx is None:
            return recv_x, None, None, per_expert, out, EventOverlap()
        recv_weights = recv_weights.masked_fill(recv_idx < 0, 0.0)
        return recv_x, recv_idx, recv_weights, per_expert, out, EventOverlap()

    def _routing(self, topk_idx, topk_weights, is_token_in_rank, num_experts, tokens):
        """The routing symmesh's dispatch takes: topk_idx and its weights, or (without top-k, as
        DeepEP allows) one slot per rank the token goes to, naming that rank's first expert."""
        if topk_idx is None:
            if topk_weights is not None:
                raise ValueError("dispatch: topk_weights without topk_idx")
            if tuple(is_token_in_rank.shape) != (tokens, self.group_size):
                raise ValueError(f"dispatch: is_token_in_rank has shape "
                                 f"{tuple(is_token_in_rank.shape)}: allowed [{tokens}, "
                                 f"{self.group_size}]")
            first = torch.arange(self.group_size) * (num_experts // self.group_size)
            idx = torch.where(is_token_in_rank.bool(), first, torch.full_like(first, -1))
            return idx, torch.zeros(idx.shape, dtype=torch.float32)
        check_routing(topk_idx, num_experts, self.group_size)
        if topk_idx.shape[0] != tokens:
            raise ValueError(f"dispatch: topk_idx has {topk_idx.shape[0]} tokens; x has {tokens}")
        if topk_weights is None:
            topk_weights = torch.zeros(topk_idx.shape, dtype=torch.float32)
        return topk_idx.long(), topk_weights

    def _gathered_counts(self, num_tokens_per_rank, num_tokens_per_expert):
        """Every rank's [num_tokens_per_rank, num_tokens_per_expert], a row each (int64)."""
        mine = torch.cat([num_tokens_per_rank.reshape(-1).long(),
                          num_tokens_per_expert.reshape(-1).long()])
        return torch.stack(self.group._group.all_gather_list(mine, "dispatch's counts"))

    def _cached_dispatch(self, rows, kind, handle, async_finish):
        if not isinstance(handle, Handle):
            raise ValueError(f"dispatch: the handle is a {type(handle).__name__}: pass the one "
                             f"a dispatch returned")
        if rows.shape[0] != handle.tokens:
            raise ValueError(f"cached dispatch: x has {rows.shape[0]} tokens; the handle's "
                             f"dispatch had {handle.tokens}")
        out = _rows_like(kind, handle.received, rows.dtype)
        weights = torch.zeros(handle.topk_idx.shape, dtype=torch.float32)

        def run():
            got, _, _, native = self._session.dispatch(rows, handle.topk_idx, weights,
                                                       handle.num_experts, out=out)
            if got.data_ptr() != out.data_ptr():
                out.copy_(got)
            native.release()

        event = self._run(run, async_finish, (rows, out))
        return _unpack(out, kind), None, None, None, None, event

    def combine(self, x, handle, topk_weights=None, bias=None, config=None, previous_event=None,
                async_finish=False, allocate_on_comm_stream=False):
        self._check_alive()
        if not isinstance(handle, Handle):
            raise ValueError(f"combine: the handle is a {type(handle).__name__}: pass the one a "
                             f"dispatch returned")
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] != handle.received:
            raise ValueError(f"combine: x must be [{handle.received}, hidden] (one row per "
                             f"token the dispatch delivered here)")
        self._wait(previous_event)
        rows = x.contiguous()
        one_bias = self._bias(bias, handle.tokens, rows)
        weights_in = None if topk_weights is None else _padded(topk_weights.float())
        if not async_finish:  # the results lent where the daemon wrote them: nothing copied
            self._pe.drain()
            combined = self._session.combine(rows, handle.native, bias=one_bias)
            combined_w = None
            if weights_in is not None:
                combined_w = self._session.combine(weights_in, handle.native)
                combined_w = combined_w[:, :topk_weights.shape[1]]
            return combined, combined_w, EventOverlap()
        # In the background: into outputs made now, handed out at once.
        combined = torch.empty(handle.tokens, rows.shape[1], dtype=rows.dtype)
        weights_out = None
        if weights_in is not None:
            weights_out = torch.empty(handle.tokens, weights_in.shape[1], dtype=torch.float32)

        def run():
            self._session.combine(rows, handle.native, bias=one_bias, out=combined)
            if weights_in is not None:
                self._session.combine(weights_in, handle.native, out=weights_out)

        event = self._run(run, True, (rows, combined))
        combined_w = None if weights_out is None else weights_out[:, :topk_weights.shape[1]]
        return combined, combined_w, event

    @staticmethod
    def _bias(bias, tokens, rows):
        """One bias for symmesh's combine: DeepEP's pair is added first, in float32, and rounded
        once to the rows' type."""
        if bias is None:
            return None
        pair = bias if isinstance(bias, tuple) else (bias,)
        for b in pair:
            if not isinstance(b, torch.Tensor) or tuple(b.shape) != (tokens, rows.shape[1]):
                raise ValueError(f"combine: a bias must be [{tokens}, {rows.shape[1]}] (the "
                                 f"combined tokens' shape)")
        total = pair[0].float()
        for b in pair[1:]:
            total = total + b.float()
        return total.to(rows.dtype).contiguous()

    # -- low-latency mode ------------------------------------------------------------------------

    def low_latency_dispatch(self, x, topk_idx, num_max_dispatch_tokens_per_rank, num_experts,
                             use_fp8=True, async_finish=False, return_recv_hook=False):
        self._check_alive()
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.bfloat16:
            raise ValueError("low_latency_dispatch: x must be bfloat16 [tokens, hidden]")
        tokens, hidden = x.shape
        most = int(num_max_dispatch_tokens_per_rank)
        if tokens > most:
            raise ValueError(f"low_latency_dispatch: {tokens} tokens, more than "
                             f"num_max_dispatch_tokens_per_rank ({most})")
        check_routing(topk_idx, num_experts, self.group_size)
        local = num_experts // self.group_size
        capacity = most * self.group_size
        payload = _fp8.per_token_cast_to_fp8(x) if use_fp8 else x
        rows, kind = _pack(payload, "low_latency_dispatch")
        if use_fp8:
            recv_x = (torch.zeros(local, capacity, hidden, dtype=torch.uint8),
                      torch.zeros(local, hidden // 128, capacity).transpose(1, 2))
        else:
            recv_x = torch.zeros(local, capacity, hidden, dtype=torch.bfloat16)
        recv_count = torch.zeros(local, dtype=torch.int32)
        idx = topk_idx.long()
        weights = torch.zeros(idx.shape, dtype=torch.float32)
        handle = LowLatencyHandle(recv_count, most, hidden, num_experts, None, [])

        def run():
            got, recv_idx, _, native = self._session.dispatch(rows, idx, weights, num_experts)
            handle.normal = Handle(None, None, native, idx, num_experts, tokens,
                                   native.num_received)
            received = _unpack(got, kind)
            for e in range(local):
                chosen = (recv_idx == e).any(dim=1).nonzero().flatten()
                handle.rows.append(chosen)
                recv_count[e] = chosen.numel()
                if use_fp8:
                    recv_x[0][e, :chosen.numel()] = received[0][chosen]
                    recv_x[1][e, :chosen.numel()] = received[1][chosen]
                else:
                    recv_x[e, :chosen.numel()] = received[chosen]
            handle.recv_idx = recv_idx

        background = async_finish or return_recv_hook
        event = self._run(run, background, (x, topk_idx))
        hook = event.current_stream_wait if return_recv_hook else (lambda: None)
        return recv_x, recv_count, handle, event, hook

    def low_latency_combine(self, x, topk_idx, topk_weights, handle, zero_copy=False,
                            async_finish=False, return_recv_hook=False, out=None):
        self._check_alive()
        if not isinstance(handle, LowLatencyHandle):
            raise ValueError(f"low_latency_combine: the handle is a {type(handle).__name__}: "
                             f"pass the one low_latency_dispatch returned")
        self._pe.drain()  # its dispatch, if it ran in the background
        normal, local = handle.normal, handle.num_experts // self.group_size
        expected = (local, handle.max_tokens * self.group_size, handle.hidden)
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != expected:
            raise ValueError(f"low_latency_combine: x must be {list(expected)} (recv_x's layout)")
        if not torch.equal(topk_idx.long(), normal.topk_idx):
            raise ValueError("low_latency_combine: topk_idx differs from its dispatch's")
        if tuple(topk_weights.shape) != tuple(normal.topk_idx.shape):
            raise ValueError(f"low_latency_combine: topk_weights must be "
                             f"{list(normal.topk_idx.shape)}")
        combined = out if out is not None else torch.empty(normal.tokens, handle.hidden,
                                                           dtype=torch.bfloat16)
        if tuple(combined.shape) != (normal.tokens, handle.hidden):
            raise ValueError(f"low_latency_combine: out must be [{normal.tokens}, "
                             f"{handle.hidden}]")

        def run():
            # Each token's weights to the ranks of its experts, along the dispatch's paths.
            weights = _padded(topk_weights.float())
            recv_w, _, _, moved = self._session.dispatch(weights, normal.topk_idx,
                                                         topk_weights.float().contiguous(),
                                                         handle.num_experts)
            recv_w = recv_w[:, :topk_weights.shape[1]]
            moved.release()
            partial = torch.zeros(normal.received, handle.hidden, dtype=torch.float32)
            for e in range(local):
                chosen = handle.rows[e]
                slot = (handle.recv_idx[chosen] == e).float()
                w = (recv_w[chosen] * slot).sum(dim=1, keepdim=True)
                partial[chosen] += w * x[e, :chosen.numel()].float()
            summed = self._session.combine(partial, normal.native)
            combined.copy_(summed)
            normal.native.release()

        background = async_finish or return_recv_hook
        event = self._run(run, background, (x, combined))
        hook = event.current_stream_wait if return_recv_hook else (lambda: None)
        return combined, event, hook

    # -- helpers ---------------------------------------------------------------------------------

    def _check_alive(self):
        if self._destroyed:
            raise ValueError("the buffer was destroyed")

    @staticmethod
    def _wait(previous_event):
        if previous_event is not None:
            previous_event.current_stream_wait()

    def _run(self, call, in_background, keep):
        if in_background:
            return EventOverlap(self._pe.submit(call), keep)
        self._pe.drain()
        call()
        return EventOverlap()

