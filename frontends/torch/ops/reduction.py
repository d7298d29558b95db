"""Reductions: sum, mean, prod, var, max/min (with indices), argmax/argmin, any/all."""

from __future__ import annotations

import torch

from lazycore.dialect.types import is_float

from lazycore.dialect.types import is_complex

from ..lowering import apply, broadcast, const, convert, dims, lowers, reshape

aten = torch.ops.aten
prims = torch.ops.prims


def _reduce(op, x, ds, keepdim, out_shape):
    if x.shape == () or not ds:
        return reshape(x, out_shape)
    r = apply(op, x, dims=ds)
    return reshape(r, out_shape)


def _dims_arg(x, dim):
    return dims(dim, len(x.shape)) if len(x.shape) else ()


@lowers(prims.sum.default)
def _prims_sum(ctx, x, dims, output_dtype=None):
    if dims is not None and not len(dims):  # unlike aten.sum, no dims reduces nothing
        return convert(x, ctx.dtype)
    return _sum(ctx, x, dims)


def _accumulating(x, dtype):
    """``x`` in ``dtype``, then in the type eager's sums accumulate it in: halves
    add up in f32 (three f16 60000, 60000, -60000 sum to 60000, not inf)."""
    x = convert(x, dtype)
    return convert(x, "f32") if dtype in ("f16", "bf16") else x


@lowers(aten.sum.dim_IntList, aten.sum.default)
def _sum(ctx, x, dim=None, keepdim=False, dtype=None):
    x = _accumulating(x, ctx.dtype)
    return convert(_reduce("reduce_sum", x, _dims_arg(x, dim), keepdim, ctx.shape), ctx.dtype)


@lowers(aten.mean.dim, aten.mean.default)
def _mean(ctx, x, dim=None, keepdim=False, dtype=None):
    x = _accumulating(x, ctx.dtype)
    ds = _dims_arg(x, dim)
    total = _reduce("reduce_sum", x, ds, keepdim, ctx.shape)
    count = 1
    for d in ds:
        count *= x.shape[d]
    return convert(apply("div", total, const(count, x.dtype, ctx.device, ctx.shape)), ctx.dtype)


@lowers(prims.var.default)
def _var(ctx, x, dims, correction=1, output_dtype=None):
    """sum((x - mean)^2) / max(0, N - correction), two passes as eager."""
    if not (is_float(x.dtype) or is_complex(x.dtype)):
        # eager's kernel refuses; its meta function does not, so the lowering must
        raise RuntimeError("std and var only support floating point and complex dtypes")
    cplx = is_complex(x.dtype)  # the squared moduli of the deviations: a real result
    x = x if cplx else convert(x, ctx.dtype)
    ds = _dims_arg(x, dims) if dims is None or len(dims) else ()
    count = 1
    for d in ds:
        count *= x.shape[d]
    kept = tuple(1 if i in ds else n for i, n in enumerate(x.shape))
    mean = apply("div", reshape(_reduce("reduce_sum", x, ds, True, kept), kept),
                 const(count, x.dtype, x.device, kept))
    dev = apply("sub", x, broadcast(mean, x.shape))
    if cplx:
        re, im = apply("real", dev), apply("imag", dev)
        square = apply("add", apply("mul", re, re), apply("mul", im, im))
    else:
        square = apply("mul", dev, dev)
    sq = _reduce("reduce_sum", square, ds, False, ctx.shape)
    return apply("div", sq, const(max(0, count - correction), sq.dtype, x.device, ctx.shape))


@lowers(aten.prod.dim_int, aten.prod.default)
def _prod(ctx, x, dim=None, keepdim=False, dtype=None):
    x = convert(x, ctx.dtype)
    return _reduce("reduce_prod", x, _dims_arg(x, dim), keepdim, ctx.shape)


def _nan_aware(op, x, ds, keepdim, shape):
    r = _reduce(op, x, ds, keepdim, shape)
    if is_float(x.dtype) and ds and x.shape != ():
        # a NaN anywhere in the reduced slice makes the result NaN, as in eager
        isnan = apply("compare", x, x, direction="NE")
        anynan = _reduce("reduce_max", isnan, ds, keepdim, shape)
        r = apply("select", anynan, const(float("nan"), x.dtype, x.device, shape), r)
    return r


@lowers(aten.amax.default, aten.amin.default, aten.max.default, aten.min.default)
def _amax(ctx, x, dim=(), keepdim=False):
    op = "reduce_max" if ctx.func_name in ("amax", "max") else "reduce_min"
    return _nan_aware(op, x, _dims_arg(x, dim), keepdim, ctx.shape)


@lowers(aten.max.dim, aten.min.dim)
def _max_dim(ctx, x, dim, keepdim=False):
    values = _amax(ctx, x, dim, keepdim)
    indices = _arg(ctx, x, dim, keepdim, "argmax" if ctx.func_name == "max" else "argmin", ctx.out[1])
    return values, indices


def _arg(ctx, x, dim, keepdim, op, out):
    shape = tuple(out.shape)
    if dim is None:
        x = reshape(x, (max(1, _numel(x.shape)),))
        d = 0
    elif x.shape == ():
        return const(0, "i64", ctx.device, shape)
    else:
        d = dim % len(x.shape)
    if x.dtype == "i1":
        x = convert(x, "i8")
    r = apply(op, x, dim=d, dtype="i64")
    return reshape(r, shape)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@lowers(aten.argmax.default, aten.argmin.default)
def _argmax(ctx, x, dim=None, keepdim=False):
    return _arg(ctx, x, dim, keepdim, ctx.func_name, ctx.out)


# _is_all_true/_is_any_true: a bool tensor's all()/any(), what
# torch.distributions' argument and support checks and anomaly mode's NaN
# check read (they fell back, each reading its input to the host)
@lowers(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim, aten.all.dims,
        aten._is_all_true.default, aten._is_any_true.default)
def _any_all(ctx, x, dim=None, keepdim=False):
    b = convert(x, "i1")
    op = "reduce_max" if ctx.func_name in ("any", "_is_any_true") else "reduce_min"
    r = _reduce(op, b, _dims_arg(b, dim), keepdim, ctx.shape)
    return convert(r, ctx.dtype)


def _sorted(ctx, x, dim, descending):
    """``x`` sorted along ``dim`` (``lazy.sort``: stable, NaN as the largest,
    eager's order) and the indices; a 0-d tensor is its own sort."""
    if x.shape == ():
        return x, const(0, "i64", ctx.device, ())
    keys = convert(x, "i8") if x.dtype == "i1" else x  # (no order on i1 in the table)
    values, indices = apply("sort", keys, dim=dim % len(x.shape), descending=bool(descending), dtype="i64")
    return convert(values, x.dtype), indices


@lowers(aten.sort.default, aten.sort.stable)
def _sort(ctx, x, dim=-1, descending=False, *, stable=None):
    # an unstable sort may keep equal elements in their order: eager's does on CPU
    return _sorted(ctx, x, dim, descending)


@lowers(aten.argsort.default, aten.argsort.stable)
def _argsort(ctx, x, dim=-1, descending=False, *, stable=False):
    return _sorted(ctx, x, dim, descending)[1]


@lowers(aten.msort.default)
def _msort(ctx, x):
    return _sorted(ctx, x, 0, False)[0]


@lowers(aten.topk.default)
def _topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    values, indices = _sorted(ctx, x, dim, largest)
    if x.shape == ():
        return values, indices
    d = dim % len(x.shape)
    limit = list(x.shape)
    limit[d] = k
    window = dict(start=[0] * len(x.shape), limit=limit, strides=[1] * len(x.shape))
    return apply("slice", values, **window), apply("slice", indices, **window)
