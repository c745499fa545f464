"""Tensors as the bytes symmesh moves: contiguous views, heap bounce buffers, element units."""

import ctypes

import torch


def check(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{what} is a {type(tensor).__name__}: allowed a torch.Tensor")
    if tensor.device.type != "cpu":
        raise ValueError(f"{what} is on {tensor.device}: the symmesh backend takes CPU tensors")
    if tensor.is_sparse:
        raise ValueError(f"{what} is sparse: the symmesh backend takes dense tensors")
    return tensor


def nbytes(tensor):
    return tensor.numel() * tensor.element_size()


def dense(tensor):
    """`tensor` or a contiguous copy of it (what gloo does with a non-contiguous one)."""
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def write_back(target, data):
    """Puts `data` (a contiguous stand-in) into `target` unless it is target itself."""
    if data is not target:
        with torch.no_grad():
            target.copy_(data)


def copy_in(address, tensor):
    if nbytes(tensor):
        ctypes.memmove(address, tensor.data_ptr(), nbytes(tensor))


def copy_out(tensor, address):
    if nbytes(tensor):
        ctypes.memmove(tensor.data_ptr(), address, nbytes(tensor))


def unit(byte_count):
    """(symmesh dtype word, element bytes, padded byte count) that carry `byte_count` bytes
    through a collective that only copies: 4-byte units where they divide it, 2-byte ones where
    they do, else 4-byte ones over the bytes padded."""
    if byte_count % 4 == 0:
        return "f32", 4, byte_count
    if byte_count % 2 == 0:
        return "f16", 2, byte_count
    return "f32", 4, (byte_count + 3) // 4 * 4
