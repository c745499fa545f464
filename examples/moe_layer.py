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
float32 must agree within 1e-5 relative (to the largest reference value) at every step.
bfloat16 rounds every product to 8 bits of mantissa and is held to 5e-2; its runs keep the
weights (no SGD), because after an update the two layers' roundings differ enough to flip
top-k choices, and then the layers are no longer comparable.
"""

import argparse
import sys

import torch

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
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    tolerance = 1e-5 if args.dtype == "float32" else 5e-2
    torch.set_num_threads(1)

    s = symmesh.attach()
    experts = args.experts_per_pe * s.world_size
    mine = MoeLayer(args.hidden, args.ffn, experts, args.topk, seed=7, dtype=dtype)
    reference = MoeLayer(args.hidden, args.ffn, experts, args.topk, seed=7, dtype=dtype)
    local = range(s.rank * args.experts_per_pe, (s.rank + 1) * args.experts_per_pe)
    worst = 0.0
    for step in range(args.steps):
        batches = [tokens_of(r, args.tokens, args.hidden, step, dtype) for r in range(s.world_size)]
        targets = [tokens_of(r + 100, args.tokens, args.hidden, step, dtype)
                   for r in range(s.world_size)]
        # symmesh: this PE's tokens through the parallel layer; the loss of the whole world is
        # the sum of every PE's, so each PE's backward gives its share of every gradient.
        x = batches[s.rank].clone().requires_grad_(True)
        y = mine.forward_parallel(s, x)
        scale = 1.0 / (args.tokens * s.world_size * args.hidden)  # the world's mean square
        (((y.float() - targets[s.rank].float()) ** 2).sum() * scale).backward()
        s.all_reduce(mine.gate.grad)  # every PE's tokens went through the gate
        # The reference: every PE's tokens through the whole layer at once.
        x_all = torch.cat(batches).requires_grad_(True)
        y_all = reference(x_all)
        (((y_all.float() - torch.cat(targets).float()) ** 2).sum() * scale).backward()

        rows = slice(s.rank * args.tokens, (s.rank + 1) * args.tokens)
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
        print(f"moe_layer: rank {s.rank} step {step}: max relative error {error:.2e} ({name}), "
              f"{len(checks)} tensors compared", flush=True)
        if not error <= tolerance:  # NaN fails too
            print(f"moe_layer: rank {s.rank}: {name} is off by {error:.2e} relative, over "
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
    s.barrier()
    print(f"moe_layer: rank {s.rank} of {s.world_size}: {args.steps} steps forward and backward "
          f"({args.dtype}) match the single-process layer, max relative error {worst:.2e}: ok",
          flush=True)
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
