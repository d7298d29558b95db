"""Eager's ``resize_``/``resize_as_`` on lazy tensors: a new size over the same
storage where it fits, a grown storage where it does not. Its own module because
the fallback (a kernel run on host copies resizes what it writes) and the
special-op table both call it."""

from __future__ import annotations

import sys

import numpy as np
import torch

from lazycore.dialect.types import to_numpy_dtype
from lazycore.trace import core, views

from . import dtypes
from .tensor import view_of, wrap_layout


def resize_(func, args, kwargs):
    """Eager's ``resize_``: contiguous strides of the new size over the same
    memory from the same offset; where that memory ends the storage grows (a
    new one: views of the old keep it), the new elements zeros (eager leaves
    them uninitialized)."""
    x, size = args[0], tuple(int(n) for n in args[1])
    if tuple(x.shape) == size:
        return x
    if x.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    strides = _contiguous(size)
    n = strides[0] * size[0] if size else 1
    offset = x.storage_offset()
    storage = x._storage
    stored = storage.handle
    memory = int(np.prod(stored.shape))
    if dtypes.lazy_dtype(x.dtype) != stored.dtype:  # a view(dtype) of its storage
        raise RuntimeError("lazycore: resize_ of a tensor viewing its storage as another dtype is not supported")
    if offset + n <= memory:  # inside the storage: a view of it, sharing its memory with the other views
        new = view_of(x, (views.Strided(size, strides, offset),), (size, strides, offset, x.dtype))
    else:
        if sys.getrefcount(storage) > 3:  # x's, this frame's, the call's: some other tensor views it
            # eager grows the one storage its views share; here a view's steps
            # are laid over the storage's shape, which cannot change under them
            raise RuntimeError(
                f"lazycore: resize_ from {list(x.shape)} to {list(size)} needs more memory than the storage "
                "holds, and other tensors view that storage (eager grows it under them); resize a tensor "
                "no view shares, or clone() it first")
        flat = core.apply("reshape", stored, shape=(memory,))
        kept = core.apply("slice", flat, start=[offset], limit=[memory], strides=[1])
        zero = core.apply("constant", value=np.zeros((), to_numpy_dtype(stored.dtype)), device=stored.device)
        pad = core.apply("broadcast_in_dim", zero, dims=(), shape=(offset + n - memory,))
        grown = core.apply("reshape", core.apply("concatenate", kept, pad, dim=0), shape=size)
        new = wrap_layout(grown, size, strides, x.dtype, x.device)
    torch._C.TensorBase.data.__set__(x, new)  # eager resizes in place: the same tensor object
    x._storage, x._steps, x._key = new._storage, new._steps, new._key
    return x


def resize_as_(func, args, kwargs):
    return resize_(func, (args[0], tuple(args[1].shape)), {})


def _contiguous(shape) -> tuple:
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= d
    return tuple(reversed(strides))
