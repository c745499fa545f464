"""Autograd for symmesh's MoE calls, as DeepEP does it: the backward of a dispatch is a
combine (each received row's gradient goes back to its token and is summed there) and the
backward of a combine is a dispatch (each token's gradient goes to every PE that received it).

Session.dispatch and Session.combine come here by themselves when a torch tensor needs
gradients; these functions may also be called directly.

Both backwards are collective: every PE must run them. A PE whose experts got no tokens still
does: the combine of a differentiable dispatch takes the dispatch's output as an anchor, so
its backward, and through it the dispatch's, runs on every PE whose loss uses the combine.
"""

import torch

__all__ = ["dispatch", "combine"]


def _padded_width(width):
    return -(-width // 8) * 8  # combine moves rows of whole 16-byte blocks


class _Dispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, topk_weights, session, topk_idx, num_experts, active_nodes, handles):
        recv_x, recv_idx, recv_weights, handle = session._dispatch(
            x, topk_idx, topk_weights, num_experts, active_nodes=active_nodes)
        ctx.session, ctx.handle = session, handle
        ctx.topk, ctx.x_dtype = int(topk_idx.shape[1]), x.dtype
        handles.append(handle)
        ctx.mark_non_differentiable(recv_idx)
        return recv_x, recv_idx, recv_weights

    @staticmethod
    def backward(ctx, grad_x, _grad_idx, grad_weights):
        session, handle = ctx.session, ctx.handle
        received = handle.num_received
        if grad_x is None:
            grad_x = torch.zeros((received, handle.hidden), dtype=ctx.x_dtype)
        dx = session._combine(grad_x.contiguous(), handle)
        dw = None
        if ctx.needs_input_grad[1]:
            rows = torch.zeros((received, _padded_width(ctx.topk)), dtype=torch.float32)
            if grad_weights is not None:
                rows[:, :ctx.topk] = grad_weights
            dw = session._combine(rows, handle)[:, :ctx.topk].contiguous()
        return dx, dw, None, None, None, None, None


class _Combine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, expert_out, bias, anchor, session, handle):
        ctx.session, ctx.handle = session, handle
        ctx.has_bias = bias is not None
        ctx.anchor_shape = anchor.shape
        return session._combine(expert_out, handle, bias)

    @staticmethod
    def backward(ctx, grad_y):
        session, handle = ctx.session, ctx.handle
        # The same routing dispatched again delivers the same tokens in the same order: row i
        # of the result is the gradient of the token this PE's row i answered.
        grad_rows, _, _, again = session._dispatch(grad_y.contiguous(), handle.topk_idx,
                                                   handle.topk_weights, handle.num_experts,
                                                   active_nodes=handle._active_nodes)
        again.release()
        anchor = torch.zeros(ctx.anchor_shape, dtype=grad_rows.dtype)
        return grad_rows, (grad_y if ctx.has_bias else None), anchor, None, None


def dispatch(session, x, topk_idx, topk_weights, num_experts, active_nodes=0):
    """Session.dispatch, differentiable in x and topk_weights."""
    handles = []
    recv_x, recv_idx, recv_weights = _Dispatch.apply(x, topk_weights, session, topk_idx,
                                                     num_experts, active_nodes, handles)
    handles[0]._anchor = recv_x
    return recv_x, recv_idx, recv_weights, handles[0]


def combine(session, expert_out, handle, bias=None):
    """Session.combine, differentiable in expert_out and bias."""
    anchor = handle._anchor
    if anchor is None:  # a dispatch without gradients: expert_out or bias needs them
        anchor = torch.zeros(0, requires_grad=True)
    return _Combine.apply(expert_out, bias, anchor, session, handle)
