"""ATen ops that move data between devices or look at values."""

from __future__ import annotations

import torch

from lazycore.trace import core

from . import dtypes
from .tensor import Tensor, from_host, lc_device, read, to_host, wrap, write

aten = torch.ops.aten


def _meta(t):
    from .dispatch import _meta_tensor

    return _meta_tensor(t)


def copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    aten.copy_.default(_meta(dst), _meta(src))  # eager's broadcasting check
    if not isinstance(dst, Tensor):
        dst.copy_(to_host(src))
        return dst
    if isinstance(src, Tensor):
        if src.device != dst.device:
            h = core.from_numpy(dtypes.to_numpy(to_host(src)), lc_device(dst.device))
        else:
            h = read(src)
    else:
        from .tensor import upload

        h = upload(src, lc_device(dst.device))
    from .dispatch import _overlap_ok
    from .lowering import broadcast, convert

    ok = _overlap_ok(func, args, kwargs, dst)
    return write(dst, broadcast(convert(h, dtypes.lazy_dtype(dst.dtype)), tuple(dst.shape)), ok)


def to_copy(func, args, kwargs):
    (x,) = args
    dtype = kwargs.get("dtype") or x.dtype
    target = kwargs.get("device") or x.device
    target = torch.device(target)
    memory_format = kwargs.get("memory_format")
    if target.type != "lazy":
        host = to_host(x).to(dtype)
        if memory_format is not None:
            host = host.contiguous(memory_format=memory_format) if memory_format != torch.preserve_format else host
        return host.to(target)
    meta = aten._to_copy.default(_meta(x), dtype=dtype, memory_format=memory_format)
    if target.index is None:
        target = torch.device("lazy", 0)
    if target != x.device:
        moved = from_host(to_host(x).to(dtype), target)
        return wrap(read(moved), meta)
    from .lowering import convert

    return wrap(convert(read(x), dtypes.lazy_dtype(dtype)), meta)


def local_scalar_dense(func, args, kwargs):
    (x,) = args
    return core.to_numpy(read(x)).item()


def resize_(func, args, kwargs):
    x, size = args[0], tuple(args[1])
    if tuple(x.shape) == size:
        return x
    raise RuntimeError(
        f"lazycore: cannot resize a lazy tensor from {list(x.shape)} to {list(size)} "
        f"(pass an out= tensor of the result's shape)"
    )


def equal(func, args, kwargs):
    a, b = args
    return bool(torch.equal(to_host(a) if isinstance(a, Tensor) else a, to_host(b) if isinstance(b, Tensor) else b))


SPECIAL = {
    aten.copy_.default: copy_,
    aten._to_copy.default: to_copy,
    aten._local_scalar_dense.default: local_scalar_dense,
    aten.resize_.default: resize_,
    aten.equal.default: equal,
}
