"""Reductions: sum, mean, prod, var, max/min (with indices), argmax/argmin, any/all."""

from __future__ import annotations

import torch

from lazycore.dialect.types import is_float

from lazycore.dialect.types import is_complex

from lazycore.ir.context import TRACE

from ..dtypes import lazy_dtype
from ..lowering import apply, broadcast, const, convert, dims, lowers, reshape
from . import eager_loops, moments, sum_kernel

aten = torch.ops.aten
prims = torch.ops.prims


def _reduce(op, x, ds, keepdim, out_shape):
    if x.shape == () or not ds:
        if op == "reduce_sum" and is_float(x.dtype):  # (a sum from zero: -0 gives +0, as eager's)
            return reshape(apply(op, x, dims=()), out_shape)
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


def _eager_sum(ctx, x, ds, shape):
    """``x`` summed over ``ds`` as eager's CPU kernel adds where it is modelled
    (:mod:`.sum_kernel`): a contiguous float32 or float64 input summed in its
    own type over consecutive dimensions, the trailing ones (``lazy.vector_sum``)
    or with dimensions after them (``lazy.column_sum``); else ``lazy.reduce_sum``."""
    source = ctx.margs[0]
    ds = sorted(ds)
    if (x.shape == () or not ds or ds != list(range(ds[0], ds[-1] + 1)) or TRACE.symbolic
            or lazy_dtype(source.dtype) != ctx.dtype or not source.is_contiguous() or not sum_kernel.applies()):
        return _reduce("reduce_sum", x, ds, False, shape)
    count = sum_kernel.lanes(source.dtype)
    before, n, after = x.shape[:ds[0]], _numel(x.shape[ds[0]:ds[-1] + 1]), _numel(x.shape[ds[-1] + 1:])
    if count is None or n == 0 or n > sum_kernel.MAX_ROW:
        return _reduce("reduce_sum", x, ds, False, shape)
    if after == 1:  # (size-1 dims after the summed ones are no columns: eager drops them)
        # a whole tensor summed to one number is cut among eager's threads (two_pass_reduction)
        threads = torch.get_num_threads() if _numel(before) == 1 else 1
        total = apply("vector_sum", reshape(x, before + (n,)), lanes=count, threads=threads)
    elif sum_kernel.columns_alike(source.dtype, count):
        total = apply("column_sum", reshape(x, (_numel(before), n, after)), lanes=count)
    else:
        return _reduce("reduce_sum", x, ds, False, shape)
    return reshape(total, shape)


@lowers(aten.sum.dim_IntList, aten.sum.default)
def _sum(ctx, x, dim=None, keepdim=False, dtype=None):
    x = _accumulating(x, ctx.dtype)
    return convert(_eager_sum(ctx, x, _dims_arg(x, dim), ctx.shape), ctx.dtype)


@lowers(aten.mean.dim, aten.mean.default)
def _mean(ctx, x, dim=None, keepdim=False, dtype=None):
    x = _accumulating(x, ctx.dtype)
    ds = _dims_arg(x, dim)
    total = _eager_sum(ctx, x, ds, ctx.shape)
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


@lowers(aten.var.correction, aten.std.correction)
def _var_std(ctx, x, dim=None, *, correction=None, keepdim=False):
    """``torch.var`` and ``torch.std`` of a real input as eager's CPU kernels: in
    double for float32 and the halves (:func:`.moments.accumulator`), the square
    root taken there too, rounded once into the input's type. Over every
    dimension a float32/float64 input's deviations are from its mean in its own
    type (``std_var_all_cpu``: ``self.mean()``, then double); otherwise from the
    double mean (the per-row Welford in double, whose double results round as the
    two passes' do but at a float32 tie). Before, float32 variances of 64 rows of
    300 were 18 of 64 off eager's, standard deviations 11."""
    c = 1 if correction is None else correction
    rank = len(x.shape)
    ds = dims(dim, rank) if rank else ()
    if is_complex(x.dtype) or not is_float(x.dtype):
        var = _var(ctx, x, ds, c)
        out = apply("sqrt", var) if ctx.func_name == "std" else var
        return reshape(out, ctx.shape)
    own = None
    if len(ds) == rank and x.dtype in ("f32", "f64"):
        count = _numel(x.shape)
        own = apply("div", _eager_sum(ctx, x, ds, ()), const(count, x.dtype, x.device, ()))
    var, _ = moments.var_mean(x, ds, c, moments.accumulator(x.dtype, x.device.platform),
                              sqrt=ctx.func_name == "std", mean=own)
    return reshape(var, ctx.shape)


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
    ds = _dims_arg(x, dim)
    r = _nan_aware(op, x, ds, keepdim, ctx.shape)
    if ctx.func_name in ("amax", "amin") and is_float(x.dtype) and _scalar_reduction(ctx, x, ds):
        # eager's scalar loop keeps the first of equal values: a signed-zero tie is the first zero's sign
        r = _first_of_ties(x, r, ds, op, ctx.shape)
    elif ctx.func_name in ("amax", "amin") and is_float(x.dtype) and _inner_reduction(ctx, x, ds):
        # four vectors or more: the one eager's vectorized inner reduction keeps
        r = eager_loops.inner_reduction(x, r, ds, op, ctx.margs[0].dtype) or r
    elif ctx.func_name in ("amax", "amin") and is_float(x.dtype) and _outer_reduction(ctx, x, ds):
        # over the leading dims: the one eager's vectorized outer reduction (or its scalar loop) keeps
        r = eager_loops.outer_reduction(x, r, ds, op, ctx.margs[0].dtype, ctx.margs[0].element_size()) or r
    elif (ctx.func in (aten.max.default, aten.min.default) and is_float(x.dtype) and x.shape != ()
          and _all_reduced(ctx, x)):
        lanes = eager_loops.vector_run(ctx.margs[0].dtype) // 2
        chunks = _reduce_all_chunks(_numel(x.shape))
        if len(chunks) == 1:
            r = _reduce_all_order(x, r, op, lanes)
        else:
            # each thread's chunk in one vec::reduce_all, then the chunks' results one after
            # another with the scalar max from the identity (the first of equal ones)
            flat = reshape(x, (_numel(x.shape),))
            values = []
            for lo, hi in chunks:
                part = apply("slice", flat, start=[lo], limit=[hi], strides=[1])
                values.append(reshape(_reduce_all_order(part, apply(op, part, dims=(0,)), op, lanes), (1,)))
            seq = values[0]
            for v in values[1:]:  # (concatenate takes two operands)
                seq = apply("concatenate", seq, v, dim=0)
            r = reshape(_first_of_ties(seq, apply(op, seq, dims=(0,)), (0,), op, ()), tuple(r.shape))
    return r


def _all_reduced(ctx, x) -> bool:
    """``max()``/``min()`` of every element of contiguous ``x``, which eager's
    ``reduce_all_impl_vec`` runs as ``at::parallel_reduce`` of ``vec::reduce_all``."""
    return (ctx.margs[0].is_contiguous() and 0 < _numel(x.shape)
            and eager_loops.vector_run(ctx.margs[0].dtype) >= 2)


def _reduce_all_chunks(n: int) -> list:
    """``at::parallel_reduce``'s chunks of ``n`` elements (GRAIN_SIZE 32768): one up to
    it or with one thread, else OpenMP's ``invoke_parallel`` split."""
    count = eager_loops.threads()
    if n <= 32768 or count == 1:
        return [(0, n)]
    parts = min(count, -(-n // 32768))
    chunk = -(-n // parts)
    return [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]


def _reduce_all_order(x, r, op, lanes):
    """``r`` (``max()``/``min()`` of ``x``) as ``vec::reduce_all`` with ``vec::maximum``/``minimum``
    (which give the second operand of equal ones) picks it: under one vector, the last of the
    equal elements; else each lane the last of its column (element ``i`` in lane ``i % lanes``,
    the partial last vector into the first lanes), then the lanes halved (lane ``i`` against
    ``i + half``: the upper one on a tie), as ``VecReduceAllSIMD`` shuffles float's, or (other
    types) lane after lane: the last of the equal lanes."""
    n = _numel(x.shape)
    flat = reshape(x, (n,))
    direction = "GT" if op == "reduce_max" else "LT"
    fill = float("-inf") if op == "reduce_max" else float("inf")
    if x.dtype in ("f16", "bf16") and lanes // 2 < n < lanes:
        # a reduced float under one vector of its own but over one of float (functional_bfloat16.h
        # reduce_all): the two float halves combined where both hold elements (vec_fun(lo, hi): the
        # upper on a tie), then the float vector reduced as VecReduceAllSIMD<float> does (below)
        f = lanes // 2
        low = apply("slice", flat, start=[0], limit=[n - f], strides=[1])
        high = apply("slice", flat, start=[f], limit=[n], strides=[1])
        value = apply("select", apply("compare", low, high, direction=direction), low, high)
        if n - f < f:
            value = apply("concatenate", value, apply("slice", flat, start=[n - f], limit=[f], strides=[1]), dim=0)
        value = _halved(value, f, direction)
    elif n < lanes:
        value = _last_of_ties(flat, op, fill)
    else:
        rows = -(-n // lanes)
        if rows * lanes != n:
            flat = apply("concatenate", flat, const(fill, x.dtype, x.device, (rows * lanes - n,)), dim=0)
        grid = reshape(flat, (rows, lanes))
        value = _last_of_ties(apply("permute", grid, dims=(1, 0)), op, fill)  # (lanes,)
        if x.dtype != "f32":  # (VecReduceAllSIMD is float's: other lanes are combined one after another)
            value = _last_of_ties(value, op, fill)
        value = _halved(value, lanes if x.dtype == "f32" else 1, direction)
    value = reshape(value, tuple(r.shape))
    return apply("select", apply("compare", r, r, direction="NE"), r, value)  # (NaN stays)


def _halved(value, half: int, direction: str):
    """The first ``half`` lanes of ``value`` reduced to one as ``VecReduceAllSIMD``
    shuffles them: lane ``i`` against ``i + half / 2``, the upper one on a tie,
    until one is left; a 0-d result."""
    while half > 1:
        half //= 2
        low = apply("slice", value, start=[0], limit=[half], strides=[1])
        high = apply("slice", value, start=[half], limit=[2 * half], strides=[1])
        value = apply("select", apply("compare", low, high, direction=direction), low, high)
    return reshape(value, ())


def _last_of_ties(x, op, fill):
    """Along ``x``'s last dim: the last element equal to its ``op`` (``reduce_max``/``min``)."""
    last = len(x.shape) - 1
    best = apply(op, x, dims=(last,))
    kept = tuple(x.shape[:-1]) + (1,)
    equal = apply("compare", x, broadcast(reshape(best, kept), x.shape), direction="EQ")
    position = apply("iota", dim=last, shape=tuple(x.shape), dtype="i64", device=x.device)
    at = apply("reduce_max", apply("select", equal, position, const(-1, "i64", x.device, tuple(x.shape))),
               dims=(last,))
    only = apply("compare", position, broadcast(reshape(at, kept), x.shape), direction="EQ")
    return apply(op, apply("select", only, x, const(fill, x.dtype, x.device, tuple(x.shape))), dims=(last,))


def _scalar_reduction(ctx, x, ds) -> bool:
    """Eager's ``amax``/``amin`` of contiguous ``x`` over its trailing dims ``ds``, fewer
    elements each than its vector reduction's four vectors (``binary_kernel_reduce_vec``:
    ``vectorized_inner_reduction`` leaves them all to ``basic_loop``, in order)."""
    rank = len(x.shape)
    if not ds or sorted(ds) != list(range(rank - len(ds), rank)) or not ctx.margs[0].is_contiguous():
        return False
    run = eager_loops.vector_run(ctx.margs[0].dtype)  # two vectors
    return run > 0 and _numel(x.shape[rank - len(ds):]) < 2 * run


def _inner_reduction(ctx, x, ds) -> bool:
    """Eager's ``amax``/``amin`` of contiguous ``x`` over its trailing dims ``ds``."""
    rank = len(x.shape)
    return bool(ds) and sorted(ds) == list(range(rank - len(ds), rank)) and ctx.margs[0].is_contiguous()


def _outer_reduction(ctx, x, ds) -> bool:
    """Eager's ``amax``/``amin`` of contiguous ``x`` over its leading dims ``ds`` (some kept)."""
    return (bool(ds) and sorted(ds) == list(range(len(ds))) and len(ds) < len(x.shape)
            and ctx.margs[0].is_contiguous())


def _first_of_ties(x, r, ds, op, shape):
    """``r`` (a reduction of ``x`` over ``ds``) as the first element of ``x`` equal to it."""
    kept = tuple(1 if i in ds else n for i, n in enumerate(x.shape))
    at = broadcast(reshape(r, kept), x.shape)
    equal = convert(apply("compare", x, at, direction="EQ"), "i8")
    rank = len(x.shape)
    flat = (*x.shape[:rank - len(ds)], _numel(x.shape[rank - len(ds):]))
    first = apply("argmax", reshape(equal, flat), dim=len(flat) - 1, dtype="i64")
    position = apply("iota", dim=len(flat) - 1, shape=flat, dtype="i64", device=x.device)
    only = apply("compare", position, broadcast(reshape(first, flat[:-1] + (1,)), flat), direction="EQ")
    fill = float("-inf") if op == "reduce_max" else float("inf")
    picked = apply("select", only, reshape(x, flat), const(fill, x.dtype, x.device, flat))
    value = reshape(apply(op, picked, dims=(len(flat) - 1,)), shape)
    return apply("select", apply("compare", r, r, direction="NE"), r, value)  # (NaN stays)


@lowers(aten.max.dim, aten.min.dim)
def _max_dim(ctx, x, dim, keepdim=False):
    values = _amax(ctx, x, dim, keepdim)
    indices = _arg(ctx, x, dim, keepdim, "argmax" if ctx.func_name == "max" else "argmin", ctx.out[1])
    if is_float(x.dtype) and x.shape != ():
        # eager's value is the element at its index (the first of equal ones): a signed-zero tie's sign
        d = dim % len(x.shape)
        kept = tuple(1 if i == d else n for i, n in enumerate(x.shape))
        only = apply("compare", apply("iota", dim=d, shape=x.shape, dtype="i64", device=x.device),
                     broadcast(reshape(indices, kept), x.shape), direction="EQ")
        op = "reduce_max" if ctx.func_name == "max" else "reduce_min"
        fill = float("-inf") if op == "reduce_max" else float("inf")
        picked = apply("select", only, x, const(fill, x.dtype, x.device, x.shape))
        values = apply("select", apply("compare", values, values, direction="NE"), values,
                       _reduce(op, picked, (d,), keepdim, ctx.shape))
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
