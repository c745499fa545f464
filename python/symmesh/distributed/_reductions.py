"""torch.distributed's reductions on symmesh: one table, which path each (op, dtype) takes.

Native: float32, bfloat16 and float16 with SUM, MIN, MAX (and AVG, a SUM divided by the group's
size) run as symmesh's all_reduce (16-bit types reduced in float32 and rounded once). Every
other pair that torch's gloo backend takes (PRODUCT, the bitwise ops, integers, bool, float64,
complex) gathers every member's tensor and reduces them here, in rank order, so every member
computes the same bits. What neither covers raises ValueError naming the op and the dtype.
"""

import functools

import torch
import torch.distributed as dist

NATIVE_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
_INTEGERS = {torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64}
_FLOATS = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
_COMPLEX = {torch.complex64, torch.complex128}

# op -> (its name, the word symmesh's all_reduce takes or None, how two tensors combine, the
# dtypes it takes)
_OPS = {
    dist.ReduceOp.SUM: ("SUM", "sum", torch.add, _FLOATS | _INTEGERS | _COMPLEX | {torch.bool}),
    dist.ReduceOp.AVG: ("AVG", "sum", torch.add, _FLOATS | _COMPLEX),
    dist.ReduceOp.PRODUCT: ("PRODUCT", None, torch.mul,
                            _FLOATS | _INTEGERS | _COMPLEX | {torch.bool}),
    dist.ReduceOp.MIN: ("MIN", "min", torch.minimum, _FLOATS | _INTEGERS | {torch.bool}),
    dist.ReduceOp.MAX: ("MAX", "max", torch.maximum, _FLOATS | _INTEGERS | {torch.bool}),
    dist.ReduceOp.BAND: ("BAND", None, torch.bitwise_and, _INTEGERS | {torch.bool}),
    dist.ReduceOp.BOR: ("BOR", None, torch.bitwise_or, _INTEGERS | {torch.bool}),
    dist.ReduceOp.BXOR: ("BXOR", None, torch.bitwise_xor, _INTEGERS | {torch.bool}),
}


def _entry(op):
    for key, entry in _OPS.items():
        if op == key:
            return entry
    allowed = ", ".join(name for name, *_ in _OPS.values())
    raise ValueError(f"reduce op {op}: symmesh takes {allowed} (PREMUL_SUM is NCCL's alone)")


def checked(op, dtype):
    """The op's table entry, once (op, dtype) is known to be one symmesh reduces."""
    entry = _entry(op)
    name, _, _, dtypes = entry
    if dtype not in dtypes:
        allowed = ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))
        raise ValueError(f"reduce op {name} on {str(dtype).replace('torch.', '')} tensors: "
                         f"allowed {allowed}")
    return entry


def native_word(op, dtype):
    """symmesh's all_reduce op for (op, dtype), or None where the tensors are gathered."""
    _, word, _, _ = checked(op, dtype)
    return word if dtype in NATIVE_DTYPES else None


def is_average(op):
    return op == dist.ReduceOp.AVG


def combine(op, tensors, group_size):
    """The reduction of `tensors` (every member's, in rank order)."""
    _, _, pair, _ = checked(op, tensors[0].dtype)
    result = functools.reduce(pair, tensors[1:], tensors[0].clone())
    return result / group_size if is_average(op) else result
