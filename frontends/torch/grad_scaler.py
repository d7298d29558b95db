"""``torch.amp.GradScaler``'s two kernels on lazy tensors, as eager's CPU ones.

``unscale_`` calls ``_amp_foreach_non_finite_check_and_unscale_`` (every
gradient times ``inv_scale``; ``found_inf`` set to 1 where one has a NaN or
an infinity) and ``update`` calls ``_amp_update_scale_`` (the scale backed
off after such a step, grown after ``growth_interval`` clean ones, with its
growth tracker). Both write more than one argument (a list of gradients and
``found_inf``; the scale and the tracker), which a lowering, one result per
written ``self``, cannot say; run as fallbacks they cost a barrier and two
uploads each a step. Here each is a few ops on the device written into its
arguments. The scaler's own ``found_inf.item()`` before the optimizer step
stays a read, as on CUDA.
"""

from __future__ import annotations

import torch

from lazycore.trace import composites, core

from . import fallback
from .dtypes import lazy_dtype
from .lowering import broadcast, const, convert, reshape, scalar
from .tensor import Tensor, read, write
from .tensor import meta_twin as _meta

aten = torch.ops.aten


def _arguments(args, kwargs, names) -> list:
    return [args[i] if i < len(args) else kwargs[name] for i, name in enumerate(names)]


def _on_one_lazy_device(values) -> bool:
    """Whether every argument is a lazy tensor on one device (else eager's kernel, a counted fallback)."""
    return all(isinstance(v, Tensor) for v in values) and len({v.device for v in values}) == 1


def _compute_type(dtype: str) -> str:
    """Eager's ``opmath_t``: half types computed in float32."""
    return "f32" if dtype in ("f16", "bf16") else dtype


def non_finite_check_and_unscale_(func, args, kwargs):
    grads, found_inf, inv_scale = _arguments(args, kwargs, ("self", "found_inf", "inv_scale"))
    if not _on_one_lazy_device([*grads, found_inf, inv_scale]):
        return fallback.run(func, args, kwargs)
    func([_meta(g) for g in grads], _meta(found_inf), _meta(inv_scale))  # eager's checks, at the call
    flag, inv = read(found_inf), read(inv_scale)
    for g in grads:
        dtype = lazy_dtype(g.dtype)
        wide = _compute_type(dtype)
        v = convert(read(g), wide)
        if g.numel():
            bad = convert(core.apply("not", composites.isfinite(v)), "f32")
            bad = core.apply("reduce_max", bad, dims=tuple(range(len(v.shape))))
            bad = broadcast(core.apply("compare", bad, const(0, "f32", v.device), direction="NE"), flag.shape)
            flag = core.apply("select", bad, const(1.0, "f32", v.device, flag.shape), flag)
        scaled = core.apply("mul", v, broadcast(reshape(convert(inv, wide), ()), v.shape))
        write(g, convert(scaled, dtype))
    write(found_inf, flag)


def update_scale_(func, args, kwargs):
    names = ("self", "growth_tracker", "found_inf", "scale_growth_factor", "scale_backoff_factor", "growth_interval")
    scale, tracker, found_inf, growth, backoff, interval = _arguments(args, kwargs, names)
    if not _on_one_lazy_device([scale, tracker, found_inf]):
        return fallback.run(func, args, kwargs)
    func(_meta(scale), _meta(tracker), _meta(found_inf), growth, backoff, interval)  # eager's checks
    s, t, f = read(scale), read(tracker), read(found_inf)
    dev, int_type = s.device, lazy_dtype(tracker.dtype)
    seen = reshape(core.apply("compare", f, const(0, "f32", dev, f.shape), direction="NE"), ())
    wide = convert(s, "f64")  # eager: the float scale times the double factor, stored as float
    backed = convert(core.apply("mul", wide, scalar(backoff, "f64", dev, s.shape)), "f32")
    grown = convert(core.apply("mul", wide, scalar(growth, "f64", dev, s.shape)), "f32")
    successful = core.apply("add", t, const(1, int_type, dev, t.shape))
    due = core.apply("compare", successful, const(interval, int_type, dev, t.shape), direction="EQ")
    grow = core.apply("and", broadcast(reshape(due, ()), s.shape), composites.isfinite(grown))
    new_scale = core.apply("select", broadcast(seen, s.shape), backed, core.apply("select", grow, grown, s))
    zero = const(0, int_type, dev, t.shape)
    new_tracker = core.apply("select", broadcast(seen, t.shape), zero, core.apply("select", due, zero, successful))
    write(scale, new_scale)
    write(tracker, new_tracker)
    return scale
