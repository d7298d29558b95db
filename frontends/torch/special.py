"""ATen ops that move data between devices or look at values."""

from __future__ import annotations

import numpy as np
import torch

from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir.sourceloc import release as release_frame
from lazycore.trace import core
from lazycore.trace.views import memory

from . import boxes, dtypes, grad_scaler, step_checks
from .lowering import broadcast, convert
from .storage_resize import resize_, resize_as_
from .tensor import ENTRY, Tensor, from_host, lc_device, read, to_host, upload, wrap, write
from .tensor import meta_twin as _meta

aten = torch.ops.aten


def _no_overlap_check(func, args, kwargs, target) -> bool:
    raise RuntimeError("lazycore: copy_ ran before the dispatcher registered its overlap check "
                       "(lazycore.frontends.torch.dispatch, imported by lazycore.torch)")


_overlap_ok = _no_overlap_check


def check_overlap_with(check) -> None:
    """Take ``check(func, args, kwargs, target)``, eager's rule for a write into
    memory several elements share (True, False or eager's error), from the
    dispatcher: it caches the answer per call signature, and it builds on this
    module, so it registers the check here when it is imported."""
    global _overlap_ok
    _overlap_ok = check


def copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    aten.copy_.default(_meta(dst), _meta(src))  # eager's broadcasting check
    if not isinstance(dst, Tensor):
        dst.copy_(to_host(src))
        return dst
    if dst.numel() == 0:  # nothing to write (transformers' empty key-value cache at each forward)
        return dst
    if isinstance(src, Tensor):
        if src.device != dst.device:
            h = core.from_numpy(dtypes.to_numpy(to_host(src)), lc_device(dst.device))
        elif boxes.copy_box(dst, src):  # CutMix's box of a new size each step: one program (.boxes)
            return dst
        else:
            h = read(src)
    elif src.dim() == 0:
        # a CPU tensor's value moved to the device (``n.to(device)``): data, a
        # parameter whatever its value (baked while 0 or 1, a counter such as
        # AveragedModel's n_averaged compiled again at 2, after warm-up)
        h = core.scalar(src.item(), dtypes.lazy_dtype(src.dtype), device=lc_device(dst.device), fold=False)
    else:
        h = upload(src, lc_device(dst.device))
    ok = _overlap_ok(func, args, kwargs, dst)
    return write(dst, broadcast(convert(h, dtypes.lazy_dtype(dst.dtype)), tuple(dst.shape)), ok)


def _convert(ctx, x, **_):
    """``_to_copy`` on the tensor's own device: a conversion to the result's
    dtype (the meta result's layout is the copy's), as a lowering."""
    return convert(x, dtypes.lazy_dtype(ctx.out.dtype))


def _same_device(func, args, kwargs):
    raise RuntimeError("lazycore: _to_copy ran before the dispatcher gave it its lowered path "
                       "(lazycore.frontends.torch.dispatch, imported by lazycore.torch)")


def lower_with(lowered) -> None:
    """Take ``lowered(fn, inplace)``, the dispatcher's handler maker for a
    lowering (its meta result cached and its nodes recorded per call
    signature, then replayed): a copy on the tensor's own device goes through
    it, as any lowered op does. The dispatcher builds on this module, so it
    registers the maker here when it is imported."""
    global _same_device
    _same_device = lowered(_convert, False)


def _on(target: torch.device, device: torch.device) -> bool:
    """``target`` names ``device`` (a lazy one, index 0 when it gives none)."""
    return target == device or (target.type == device.type and target.index is None and device.index == 0)


def to_copy(func, args, kwargs):
    (x,) = args
    if type(x) is Tensor:
        target = kwargs.get("device")
        if (target is None or _on(torch.device(target), x.device)) and kwargs.get("layout") in (None, torch.strided):
            # a dtype change or a copy on the device (Llama's rotary embedding, T5's masks):
            # the lowered per-op path, not the meta kernel and a new node each call (~180 us)
            if target is not None:
                kwargs = {k: v for k, v in kwargs.items() if k != "device"}
            return _same_device(func, args, kwargs)
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
    return wrap(convert(read(x), dtypes.lazy_dtype(dtype)), meta)


def local_scalar_dense(func, args, kwargs):
    (x,) = args
    if x.dtype is torch.bool and x.shape == ():  # eager's validation raising from it: checked with the step
        guess = step_checks.speculate(x)
        if guess is not None:
            return guess
    return core.to_numpy(read(x)).item()


def equal(func, args, kwargs):
    a, b = args
    return bool(torch.equal(to_host(a) if isinstance(a, Tensor) else a, to_host(b) if isinstance(b, Tensor) else b))


def _storage_numel(x) -> int:
    """Elements of ``x``'s type its storage holds, as eager counts them
    (``storage().nbytes() / itemsize``): a lazy view's storage is its base's
    memory (:func:`~lazycore.trace.views.memory`), where torch's wrapper of
    the view counts only the view's extent."""
    if not isinstance(x, Tensor):
        return x.untyped_storage().nbytes() // x.element_size()
    stored = x._storage
    n = memory(stored)
    if stored.handle.dtype != dtypes.lazy_dtype(x.dtype):  # a view(dtype) of its storage
        n = n * np.dtype(to_numpy_dtype(stored.handle.dtype)).itemsize // x.element_size()
    return n


def has_same_storage_numel(func, args, kwargs):
    """Forward AD's question, at every ``make_dual`` and every dual result
    (jvp, jacfwd, hessian, ``torch.autograd.forward_ad``): whether a tangent's
    layout can be the primal's as it is. Answered from the layouts; as a
    fallback it read both values and answered for their host copies."""
    a, b = args
    return _storage_numel(a) == _storage_numel(b)


def new_zeros_with_same_feature_meta(func, args, kwargs):
    """Forward AD's zero tangent laid out as ``other`` (sizes, strides and
    offset into a storage of ``other``'s size), after ``self``'s leading
    ``self_num_batch_dims`` sizes, as eager's kernel lays it out: zeros of the
    lazy device viewed ``as_strided``, where a fallback uploaded host zeros."""
    self, other = args[0], args[1]
    batch = kwargs.get("self_num_batch_dims", args[2] if len(args) > 2 else 0)
    numel = _storage_numel(other)
    sizes = list(self.shape[:batch]) + list(other.shape)
    strides, total = [], numel
    for n in reversed(self.shape[:batch]):
        strides.insert(0, total)
        total *= n
    strides += list(other.stride())
    try:
        flat = torch.zeros(total, dtype=other.dtype, device=other.device)
        return flat.as_strided(sizes, strides, other.storage_offset())
    finally:
        release_frame(ENTRY.frame)  # (as a decomposition's)


SPECIAL = {
    aten._has_same_storage_numel.default: has_same_storage_numel,
    aten._new_zeros_with_same_feature_meta.default: new_zeros_with_same_feature_meta,
    aten._amp_foreach_non_finite_check_and_unscale_.default: grad_scaler.non_finite_check_and_unscale_,
    aten._amp_update_scale_.default: grad_scaler.update_scale_,
    aten.copy_.default: copy_,
    aten._to_copy.default: to_copy,
    aten._local_scalar_dense.default: local_scalar_dense,
    aten._linalg_check_errors.default: step_checks.linalg_check_errors,
    aten.resize_.default: resize_,
    aten.resize_as_.default: resize_as_,
    aten.equal.default: equal,
}
