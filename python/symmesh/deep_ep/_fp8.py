"""FP8 E4M3 (OCP's e4m3fn, torch.float8_e4m3fn's: 1 sign, 4 exponent bits of bias 7, 3 mantissa
bits; 448 the largest, no infinities, 0x7f and 0xff NaN) as uint8 tensors, for torch 1.13, which
has no float8 type; and DeepEP's per-token casts: one float32 scale per 128 channels."""

import torch

_NAN = 0x7F


def _positive_values():
    """The value of each byte 0x00..0x7e (all finite non-negative codes), increasing."""
    codes = torch.arange(0x7F, dtype=torch.int64)
    exponent, mantissa = codes >> 3, (codes & 7).double()
    normal = (1 + mantissa / 8) * torch.pow(2.0, (exponent - 7).double())
    subnormal = mantissa / 8 * 2.0 ** -6
    return torch.where(exponent == 0, subnormal, normal)


_VALUES = _positive_values()
_MIDPOINTS = (_VALUES[1:] + _VALUES[:-1]) / 2
_DECODE = torch.cat([_VALUES, torch.tensor([float("nan")], dtype=torch.float64)])
_DECODE = torch.cat([_DECODE, -_DECODE]).float()  # byte -> value (sign bit 0x80)


def to_e4m3(x):
    """float tensor -> uint8 codes, rounded to the nearest value (ties to the even code),
    saturated at +-448; NaN -> 0x7f."""
    v = x.double()
    magnitude = v.abs().clamp(max=448.0)
    code = torch.bucketize(magnitude, _MIDPOINTS, right=False)  # a tie goes to the lower code
    tie = (code < len(_MIDPOINTS)) & (magnitude == _MIDPOINTS[code.clamp(max=len(_MIDPOINTS) - 1)])
    code = torch.where(tie & (code % 2 == 1), code + 1, code)  # ...unless that one is odd
    code = code | torch.where(torch.signbit(v), 0x80, 0)
    return torch.where(torch.isnan(v), torch.full_like(code, _NAN), code).to(torch.uint8)


def from_e4m3(codes):
    """uint8 codes -> float32 values."""
    return _DECODE[codes.long()]


def row_bytes(hidden):
    """A token's codes and scales side by side, padded to 16 bytes (eight 2-byte elements, the
    multiple symmesh's MoE rows take): the row an FP8 dispatch moves."""
    return (hidden + hidden // 32 + 15) // 16 * 16


def per_token_cast_to_fp8(x):
    """DeepEP's cast: x [tokens, hidden] (hidden a multiple of 128) -> (codes uint8 [tokens,
    hidden], scales float32 [tokens, hidden / 128]), each 128 channels scaled so their largest
    magnitude maps to 448. Both are views of one [tokens, row_bytes(hidden)] uint8 tensor, the
    rows a dispatch moves, so dispatching them copies nothing more."""
    tokens, hidden = x.shape
    if hidden % 128:
        raise ValueError(f"FP8 casting: hidden {hidden} is not a multiple of 128")
    blocks = x.float().view(tokens, hidden // 128, 128)
    scales = blocks.abs().amax(dim=2).clamp(min=1e-4) / 448.0
    rows = torch.zeros(tokens, row_bytes(hidden), dtype=torch.uint8)
    rows[:, :hidden] = to_e4m3(blocks / scales.unsqueeze(2)).view(tokens, hidden)
    packed_scales = rows[:, hidden:hidden + hidden // 32].view(torch.float32)
    packed_scales.copy_(scales)
    return rows[:, :hidden], packed_scales


def packed_rows(codes, scales):
    """The [tokens, row_bytes(hidden)] uint8 rows codes and scales lie in, side by side, when
    per_token_cast_to_fp8 made them (or they lie alike in one allocation); else None."""
    tokens, hidden = codes.shape
    width = row_bytes(hidden)
    if codes.dtype != torch.uint8 or codes.stride() != (width, 1) or codes.storage_offset():
        return None
    if scales.stride() != (width // 4, 1) or scales.data_ptr() != codes.data_ptr() + hidden:
        return None
    storage = codes.storage()
    if scales.storage().data_ptr() != storage.data_ptr() or storage.nbytes() < tokens * width:
        return None
    return codes.as_strided((tokens, width), (width, 1))


def per_token_cast_back(codes, scales):
    """(codes, scales) -> float32 [tokens, hidden]."""
    tokens, hidden = codes.shape
    values = from_e4m3(codes).view(tokens, hidden // 128, 128)
    return (values * scales.unsqueeze(2)).view(tokens, hidden)
