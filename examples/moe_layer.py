"""A PyTorch MoE layer split over the world by expert parallelism with symmesh, checked against
the same layer run in one process.

The layer: a linear gate, softmax top-k routing, E SwiGLU experts (torch modules), weights
from a seed. PE r holds experts [r*E/W, (r+1)*E/W) and its own batch of tokens. A step:

    gate -> topk -> s.dispatch -> each local expert on its rows -> s.combine -> loss
    loss.backward()   (through symmesh.torch: dispatch's backward is a combine and back)
    all_reduce of the gate's gradient (every PE holds the gate), SGD on every parameter

Every PE also runs the whole layer alone on every PE's tokens (the reference: the batches are
seeded, so each PE can make all of them) and compares its output, its tokens' gradient, its
experts' and the gate's gradients with the reference's after each step.

Run on every node under `symmesh launch`:
    symmesh launch -- /usr/bin/python3 examples/moe_layer.py [--steps 3] [--dtype float32]
        [--api symmesh|deep_ep]
With --api deep_ep the layer is written as a DeepEP user writes it: torch.distributed on the
symmesh backend (rendezvous at MASTER_ADDR:MASTER_PORT, default 127.0.0.1:29512),
deep_ep.Buffer's get_dispatch_layout, dispatch and combine, and autograd functions whose
backward is the other call (a dispatch's is a combine, a combine's a cached dispatch).
float32 must agree within 1e-5 relative (to the largest reference value) at every step.
bfloat16 rounds every product to 8 bits of mantissa and is held to 5e-2; its runs keep the
weights (no SGD), because after an update the two layers' roundings differ enough to flip
top-k choices, and then the layers are no longer comparable.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

import symmesh


class SwiGLU(torch.nn.Module):
    def __init__(self, hidden, ffn, generator):
        super().__init__()
        scale = hidden ** -0.5
        self.w1 = torch.nn.Parameter(torch.randn(hidden, ffn, generator=generator) * scale)
        self.w3 = torch.nn.Parameter(torch.randn(hidden, ffn, generator=generator) * scale)
        self.w2 = torch.nn.Parameter(torch.randn(ffn, hidden, generator=generator) * ffn ** -0.5)

    def forward(self, x):
        return (torch.nn.functional.silu(x @ self.w1) * (x @ self.w3)) @ self.w2


class MoeLayer(torch.nn.Module):
    """Every expert's and the gate's weights, from one seed: the same on every PE."""

    def __init__(self, hidden, ffn, experts, topk, seed, dtype):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.topk = topk
        self.gate = torch.nn.Parameter(torch.randn(hidden, experts, generator=generator) * 0.1)
        self.experts = torch.nn.ModuleList(SwiGLU(hidden, ffn, generator) for _ in range(experts))
        self.to(dtype)

    def route(self, x):
        scores = torch.softmax((x @ self.gate).float(), dim=-1)
        weights, idx = torch.topk(scores, self.topk, dim=-1)
        return idx, weights / weights.sum(dim=-1, keepdim=True)

    def forward(self, x):
        """The whole layer in one process: the reference."""
        idx, weights = self.route(x)
        out = torch.zeros_like(x)
        for k in range(self.topk):
            for e, expert in enumerate(self.experts):
                rows = (idx[:, k] == e).nonzero().flatten()
                if len(rows):
                    w = weights[rows, k].unsqueeze(1).to(x.dtype)
                    out = out.index_add(0, rows, w * expert(x[rows]))
        return out

    def forward_parallel(self, s, x):
        """The same layer with this PE's experts only and symmesh moving the tokens."""
        idx, weights = self.route(x)
        recv_x, recv_idx, recv_weights, handle = s.dispatch(x, idx, weights, len(self.experts))
        per_pe = len(self.experts) // s.world_size
        rows_out = torch.zeros_like(recv_x)
        for k in range(self.topk):
            for local in range(per_pe):
                rows = (recv_idx[:, k] == local).nonzero().flatten()
                if len(rows):
                    expert = self.experts[s.rank * per_pe + local]
                    w = recv_weights[rows, k].unsqueeze(1).to(x.dtype)
                    rows_out = rows_out.index_add(0, rows, w * expert(recv_x[rows]))
        return s.combine(rows_out, handle)


class DeepEpDispatch(torch.autograd.Function):
    """DeepEP's dispatch; its backward combines the gradients back (and those of the weights)."""

    @staticmethod
    def forward(ctx, x, topk_idx, topk_weights, buffer, num_experts):
        per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(topk_idx, num_experts)
        recv_x, recv_idx, recv_weights, _, handle, _ = buffer.dispatch(
            x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
            num_tokens_per_expert=per_expert, topk_idx=topk_idx, topk_weights=topk_weights)
        ctx.buffer, ctx.handle = buffer, handle
        ctx.mark_non_differentiable(recv_idx)
        return recv_x, recv_idx, recv_weights, handle

    @staticmethod
    def backward(ctx, grad_x, grad_idx, grad_weights, grad_handle):
        combined, combined_weights, _ = ctx.buffer.combine(
            grad_x.contiguous(), ctx.handle, topk_weights=grad_weights.contiguous())
        return combined, None, combined_weights, None, None


class DeepEpCombine(torch.autograd.Function):
    """DeepEP's combine; its backward is a cached dispatch of the gradients."""

    @staticmethod
    def forward(ctx, rows, handle, buffer):
        combined, _, _ = buffer.combine(rows.contiguous(), handle)
        ctx.buffer, ctx.handle = buffer, handle
        return combined

    @staticmethod
    def backward(ctx, grad):
        recv, _, _, _, _, _ = ctx.buffer.dispatch(grad.contiguous(), handle=ctx.handle)
        return recv, None, None


def forward_deep_ep(layer, buffer, x, rank, world):
    """The parallel layer as a DeepEP user writes it."""
    idx, weights = layer.route(x)
    recv_x, recv_idx, recv_weights, handle = DeepEpDispatch.apply(x, idx, weights, buffer,
                                                                  len(layer.experts))
    per_pe = len(layer.experts) // world
    rows_out = torch.zeros_like(recv_x)
    for k in range(layer.topk):
        for local in range(per_pe):
            rows = (recv_idx[:, k] == local).nonzero().flatten()
            if len(rows):
                w = recv_weights[rows, k].unsqueeze(1).to(x.dtype)
                expert = layer.experts[rank * per_pe + local]
                rows_out = rows_out.index_add(0, rows, w * expert(recv_x[rows]))
    return DeepEpCombine.apply(rows_out, handle, buffer)


class SymmeshApi:
    """The layer's calls on symmesh's own API (a process symmesh launch started)."""

    def __init__(self):
        self.s = symmesh.attach()
        self.rank, self.world = self.s.rank, self.s.world_size

    def forward(self, layer, x):
        return layer.forward_parallel(self.s, x)

    def all_reduce(self, t):
        self.s.all_reduce(t)

    def close(self):
        self.s.barrier()
        self.s.close()


class DeepEpApi:
    """The layer's calls on DeepEP's API over torch.distributed's symmesh backend."""

    def __init__(self):
        import symmesh.deep_ep as deep_ep
        import symmesh.distributed  # noqa: F401: registers the backend

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29512")
        dist.init_process_group("symmesh", init_method="env://",
                                rank=int(os.environ["SYMMESH_RANK"]),
                                world_size=int(os.environ["SYMMESH_WORLD_SIZE"]))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.buffer = deep_ep.Buffer(dist.group.WORLD, int(1e9), 0)

    def forward(self, layer, x):
        return forward_deep_ep(layer, self.buffer, x, self.rank, self.world)

    def all_reduce(self, t):
        dist.all_reduce(t)

    def close(self):
        dist.barrier()
        dist.destroy_process_group()


def tokens_of(rank, count, hidden, step, dtype):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(count, hidden, generator=generator).to(dtype)


def relative_error(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-30)).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=24, help="per PE")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--ffn", type=int, default=48)
    parser.add_argument("--experts-per-pe", type=int, default=2)
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--api", default="symmesh", choices=["symmesh", "deep_ep"])
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    tolerance = 1e-5 if args.dtype == "float32" else 5e-2
    torch.set_num_threads(1)

    api = SymmeshApi() if args.api == "symmesh" else DeepEpApi()
    rank, world = api.rank, api.world
    experts = args.experts_per_pe * world
    mine = MoeLayer(args.hidden, args.ffn, experts, args.topk, seed=7, dtype=dtype)
    reference = MoeLayer(args.hidden, args.ffn, experts, args.topk, seed=7, dtype=dtype)
    local = range(rank * args.experts_per_pe, (rank + 1) * args.experts_per_pe)
    worst = 0.0
    for step in range(args.steps):
        batches = [tokens_of(r, args.tokens, args.hidden, step, dtype) for r in range(world)]
        targets = [tokens_of(r + 100, args.tokens, args.hidden, step, dtype)
                   for r in range(world)]
        # symmesh: this PE's tokens through the parallel layer; the loss of the whole world is
        # the sum of every PE's, so each PE's backward gives its share of every gradient.
        x = batches[rank].clone().requires_grad_(True)
        y = api.forward(mine, x)
        scale = 1.0 / (args.tokens * world * args.hidden)  # the world's mean square
        (((y.float() - targets[rank].float()) ** 2).sum() * scale).backward()
        api.all_reduce(mine.gate.grad)  # every PE's tokens went through the gate
        # The reference: every PE's tokens through the whole layer at once.
        x_all = torch.cat(batches).requires_grad_(True)
        y_all = reference(x_all)
        (((y_all.float() - torch.cat(targets).float()) ** 2).sum() * scale).backward()

        rows = slice(rank * args.tokens, (rank + 1) * args.tokens)
        checks = {
            "output": relative_error(y.detach(), y_all.detach()[rows]),
            "x.grad": relative_error(x.grad, x_all.grad[rows]),
            "gate.grad": relative_error(mine.gate.grad, reference.gate.grad),
        }
        for e in local:
            for name, p in mine.experts[e].named_parameters():
                checks[f"expert{e}.{name}.grad"] = relative_error(
                    p.grad, dict(reference.experts[e].named_parameters())[name].grad)
        name, error = max(checks.items(), key=lambda item: item[1])
        worst = max(worst, error)
        print(f"moe_layer: rank {rank} step {step}: max relative error {error:.2e} ({name}), "
              f"{len(checks)} tensors compared", flush=True)
        if not error <= tolerance:  # NaN fails too
            print(f"moe_layer: rank {rank}: {name} is off by {error:.2e} relative, over "
                  f"{tolerance:.0e}", file=sys.stderr)
            return 1
        if args.dtype == "float32":
            with torch.no_grad():  # SGD: this PE's experts and the gate; the reference's all
                for p in [mine.gate] + [p for e in local for p in mine.experts[e].parameters()]:
                    p -= args.lr * p.grad
                for p in reference.parameters():
                    p -= args.lr * p.grad
        mine.zero_grad()
        reference.zero_grad()
    api.close()
    print(f"moe_layer: rank {rank} of {world}: {args.steps} steps forward and backward "
          f"({args.dtype}) match the single-process layer, max relative error {worst:.2e}: ok",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
