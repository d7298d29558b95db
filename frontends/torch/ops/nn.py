"""Neural-network ops met in every training step: linear layers, softmax,
losses and activation backwards, and the optimizers' fused updates.

PyTorch has decompositions for all of them; direct lowerings exist because
the decompositions run through Python prims wrappers at 1-10 ms a call, which
would dominate the tracing time of a training step.
"""

from __future__ import annotations

import torch

from lazycore.trace import core

from ..dtypes import chalf_rounded, check_chalf, lazy_dtype
from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, operand, reshape, scalar
from . import eager_loops, gelu_onednn
from .indexing import _wrap, checked
from .lane_sums import kernel_lanes
from .moments import WIDE_PLATFORMS, row_moments

aten = torch.ops.aten


def _keep(h, d, shape):
    """A reduction over ``d`` broadcast back to ``shape``."""
    kept = tuple(1 if i == d else n for i, n in enumerate(shape))
    return broadcast(reshape(h, kept), shape)


def _reduce_keep(op, x, d):
    if x.shape == ():
        return x
    return _keep(apply(op, x, dims=(d,)), d, x.shape)


def _dim(d, rank):
    return (d % rank) if rank else 0


@lowers(aten.addmm.default, aten._sparse_addmm.default)  # (the latter: a sparse operand arrives densified)
def _addmm(ctx, bias, m1, m2, beta=1, alpha=1):
    """``beta * bias + alpha * (m1 @ m2)``. Float16/bfloat16 are computed in
    float32 and rounded once, as eager's GEMM adds the bias to its float32
    accumulator (a linear layer under autocast; the product rounded before
    the bias differed from eager in a third of the outputs)."""
    dt = "f32" if ctx.dtype in ("f16", "bf16") else ctx.dtype
    m1, m2 = convert(m1, dt), convert(m2, dt)
    prod = None  # eager's own order where it is known (alpha 1: its GEMM scales inside otherwise)
    if dt == ctx.dtype and alpha == 1 and beta in (0, 1):
        prod = eager_loops.gemm_chain(m1, m2, fused_multiply_add, ctx.margs[2])
        if prod is None and beta == 1:  # the bias is added after the first block of K (eager_loops.gemm_blocks)
            ordered = eager_loops.ordered_dot(m1, m2, operand(bias, dt, ctx.shape, ctx.device))
            if ordered is not None:
                return convert(ordered, ctx.dtype)
        elif prod is None:
            prod = eager_loops.ordered_dot(m1, m2)
    if prod is None:
        prod = apply("dot_general", m1, m2, lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    if alpha != 1:
        prod = apply("mul", prod, scalar(alpha, dt, ctx.device, ctx.shape))
    if beta == 0:
        return convert(prod, ctx.dtype)
    b = operand(bias, dt, ctx.shape, ctx.device)
    if beta != 1:
        b = apply("mul", b, scalar(beta, dt, ctx.device, ctx.shape))
    return convert(apply("add", b, prod), ctx.dtype)


@lowers(aten.threshold_backward.default)
def _threshold_backward(ctx, grad, x, threshold):
    grad = convert(grad, ctx.dtype)
    below = apply("compare", x, operand(threshold, x.dtype, x.shape, ctx.device), direction="LE")
    return apply("select", broadcast(below, ctx.shape), const(0, ctx.dtype, ctx.device, ctx.shape),
                 broadcast(grad, ctx.shape))


# Eager's activation backwards broadcast their operands, as every pointwise
# kernel does; vmap's batching rule hands them a batched gradient beside an
# unbatched output (jacrev over a model's parameters, per-sample Jacobians).


# Their orders and types are eager's CPU kernels', probed bitwise (8,192 values
# a type): sigmoid's ``(grad * (1 - y)) * y`` (float16 rounding each op,
# bfloat16 in float32 rounded once); tanh's ``grad * (1 - y * y)`` with the
# ``1 - y * y`` one fused multiply-add (float16 and bfloat16 in float32,
# rounded once). ``grad * (y * (1 - y))`` differed
# from eager in 1,486 of 4,096 float32 gradients, bfloat16's per-op roundings
# in 1,082 (an autocast model's SiLU/sigmoid/tanh gradients).


@lowers(aten.sigmoid_backward.default)
def _sigmoid_backward(ctx, grad, y):
    dt = "f32" if ctx.dtype == "bf16" else ctx.dtype
    grad, y = (convert(operand(v, ctx.dtype, ctx.shape, ctx.device), dt) for v in (grad, y))
    one = const(1, dt, ctx.device, ctx.shape)
    return convert(apply("mul", apply("mul", grad, apply("sub", one, y)), y), ctx.dtype)


@lowers(aten.tanh_backward.default)
def _tanh_backward(ctx, grad, y):
    grad, y = (operand(v, ctx.dtype, ctx.shape, ctx.device) for v in (grad, y))
    if ctx.dtype in ("f32", "f64", "f16", "bf16"):
        dt = "f64" if ctx.dtype == "f64" else "f32"
        grad, y = convert(grad, dt), convert(y, dt)
        rest = fused_multiply_add(apply("neg", y), y, const(1, dt, ctx.device, ctx.shape))
        return convert(apply("mul", grad, rest), ctx.dtype)
    one = const(1, ctx.dtype, ctx.device, ctx.shape)
    return apply("mul", grad, apply("sub", one, apply("mul", y, y)))


def _exp_as_eager(x):
    """exp as eager's vectorized kernels compute it: float32's is SLEEF's
    (``lazy.exp_sleef``: one node, whose lowering builds SLEEF's steps)."""
    return apply("exp_sleef" if x.dtype == "f32" else "exp", x)


def _sigmoid_as_eager(x):
    """``1 / (1 + exp(-x))`` with eager's vectorized exp (the sigmoid inside
    silu's and mish's kernels): ``lazy.logistic``, whose CPU lowering takes
    float32's exp from SLEEF (float64's is XLA's, as before)."""
    return apply("logistic", x)


def _in_kernel_type(ctx, *values):
    """``(type, values)``: the activation kernels' computing type (float64's own,
    float32 for float32/float16/bfloat16, rounded to the result's type once at
    the end) and ``values`` in it; None for other types (the composite runs)."""
    if ctx.dtype not in ("f32", "f64", "f16", "bf16"):
        return None
    dt = "f64" if ctx.dtype == "f64" else "f32"
    return dt, [convert(operand(v, ctx.dtype, ctx.shape, ctx.device), dt) for v in values]


def _tail_exp(x):
    """exp as eager's scalar tail computes it (``std::exp`` of a float: glibc's
    expf, which works in double): float64's exp rounded to float32 once. glibc's
    expf is not always correctly rounded (117 of 200,000 of N(0, 400) are an ulp
    off this), so a tail element can differ; eager's tail is at most two vectors
    less one element per loop call."""
    return convert(apply("exp", convert(x, "f64")), "f32")


def _vector_or_tail(ctx, vector, tail, grain=None, operands=1):
    """``vector()`` where eager's elementwise loop runs its vector code, ``tail()``
    in its scalar tail (:func:`.eager_loops.scalar_tail`), each built only where
    needed; None when not modelled. The activation kernels are built for AVX512 too (``ALSO_REGISTER_AVX512_DISPATCH``,
    unlike the binary loops): their step is two of the softmax kernels' vectors
    (:func:`.lane_sums.kernel_lanes`: 16 float32 lanes on AVX512, so 32
    elements; a row of 17 runs all in the scalar tail). ``operands``: how many
    of the op's first arguments the loop reads (their strides decide it)."""
    run = 2 * kernel_lanes(torch.float32) * 4 // ctx.margs[0].element_size()
    where = eager_loops.scalar_tail(ctx.shape, ctx.out.dtype, ctx.margs[:operands], ctx.device, run=run,
                                    **({} if grain is None else {"grain": grain}))
    if where is None:
        return None
    if where is False:
        return vector()
    if where is True:
        return tail()
    return apply("select", where, tail(), vector())


@lowers(aten.silu.default)
def _silu(ctx, x):
    """Eager's CPU kernel (``Activation.cpp``, ``silu_kernel``): ``x / (1 +
    exp(-x))``, SLEEF's exp in the vector loop and glibc's in its scalar tail
    (:func:`_tail_exp`), float16/bfloat16 in float32 rounded once. Before: the
    composite ``x * sigmoid(x)`` with XLA's exp, 11,995 of 49,152 float32
    values of 2 * N(0, 1) an ulp off. Float64 (SLEEF's expd in eager) keeps the
    composite (torch._decomp's ``x * sigmoid(x)``)."""
    x = operand(x, ctx.dtype, ctx.shape, ctx.device)
    if ctx.dtype == "f64":
        return apply("mul", x, apply("logistic", x))
    if ctx.dtype not in ("f32", "f16", "bf16"):
        return NotImplemented  # (complex: eager's kernel)
    wide = convert(x, "f32")
    one = const(1, "f32", ctx.device, ctx.shape)
    neg = apply("neg", wide)
    out = _vector_or_tail(ctx, lambda: apply("div", wide, apply("add", one, _exp_as_eager(neg))),
                          lambda: apply("div", wide, apply("add", one, _tail_exp(neg))))
    return apply("mul", x, apply("logistic", x)) if out is None else convert(out, ctx.dtype)


def _erf_vector(x):
    """``Vectorized<float>::erf`` (``vec512``/``vec256_float.h``): Abramowitz
    and Stegun 7.1.26, ``t = 1 / fma(p, |x|, 1)``, ``r`` the quartic in ``t``
    by fused multiply-adds, ``erf = sign(x) * fma(-exp(-x * x) * t, r, 1)``
    with SLEEF's exp, the sign put in by a xor."""
    dt, dev, shape = x.dtype, x.device, x.shape

    def k(v):
        return const(v, dt, dev, shape)

    t = apply("div", k(1), fused_multiply_add(k(0.3275911), apply("abs", x), k(1)))
    r = k(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736):
        r = fused_multiply_add(r, t, k(c))
    r = fused_multiply_add(r, t, k(0.254829592))
    e = apply("exp_sleef", apply("neg", apply("mul", x, x)))
    magnitude = fused_multiply_add(apply("mul", apply("neg", e), t), r, k(1))
    bits = apply("bitcast_convert", x, dtype="i32")
    negative = apply("compare", bits, const(0, "i32", dev, shape), direction="LT")
    return apply("select", negative, apply("neg", magnitude), magnitude)


_GELU_MIN_ELEMENTS_FOR_MULTI_THREADING = 16384


@lowers(aten.gelu.default)
def _gelu(ctx, x, approximate="none"):
    """'none' (erf) as eager's CPU kernel (``Activation.cpp``, ``GeluKernelImpl``):
    ``(x * 0.5) * (1 + erf(x * sqrt(1/2)))``, the vector loop's erf
    :func:`_erf_vector` (SLEEF's exp inside), the scalar tail's ``std::erf``
    (glibc's erff) as float64's erf rounded to float32, float16/bfloat16 in
    float32 rounded once; the kernel's own grain (``numel / threads`` above
    16,384 elements) places the threads' tails. Before: torch._decomp's form
    with XLA's erf, 22,686 of 49,152 float32 of 2 * N(0, 1) off ATen's kernel.
    Where eager runs oneDNN instead (:func:`_gelu_by_onednn`: contiguous float32,
    the usual case), oneDNN's form (:mod:`.gelu_onednn`: its minimax polynomial on
    AVX512, Abramowitz-Stegun's on AVX2); for 'tanh' and float64 the
    decomposition's form stays."""
    x = operand(x, ctx.dtype, ctx.shape, ctx.device)
    if ctx.dtype not in ("f32", "f16", "bf16", "f64"):
        return NotImplemented
    dt = "f64" if ctx.dtype == "f64" else "f32"
    wide = convert(x, dt)

    def k(v):
        return const(v, dt, ctx.device, ctx.shape)

    by_onednn = _gelu_by_onednn(ctx)
    form = gelu_onednn.forward_form() if approximate == "none" and dt == "f32" and by_onednn else None
    if form is not None:
        return convert(form(wide), ctx.dtype)
    if approximate == "tanh" or dt == "f64" or by_onednn:
        return convert(_gelu_composite(wide, approximate, k), ctx.dtype)
    half = apply("mul", wide, k(0.5))
    scaled = apply("mul", wide, k(0.70710678118654752440))
    grain = _gelu_grain(ctx)
    out = _vector_or_tail(ctx, lambda: apply("mul", half, apply("add", k(1), _erf_vector(scaled))),
                          lambda: apply("mul", half, apply("add", k(1), convert(
                              apply("erf", convert(scaled, "f64")), "f32"))), grain=grain)
    if out is None:
        return convert(_gelu_composite(wide, approximate, k), ctx.dtype)
    return convert(out, ctx.dtype)


def _gelu_grain(ctx):
    """The gelu kernels' own ``at::parallel_for`` grain: ``numel / threads``
    above 16,384 elements (None: the loops' default)."""
    numel = 1
    for n in ctx.shape:
        numel *= n
    if numel > _GELU_MIN_ELEMENTS_FOR_MULTI_THREADING:
        return max(numel // eager_loops.threads(), 1)
    return None


def _gelu_by_onednn(ctx) -> bool:
    """Eager's ``gelu`` 'none' of the forward's input: :func:`_onednn_takes`."""
    return _onednn_takes(ctx.margs[0])


def _onednn_takes(x) -> bool:
    """Eager's ``gelu`` 'none' (and its backward) of a contiguous tensor of 2 or
    more elements runs oneDNN's eltwise ``gelu_erf`` (``Activation.cpp``,
    ``use_mkldnn``), not ATen's kernel (33,764 of 49,152 float32 of 2 * N(0, 1)
    differ between the two): float32 always, bfloat16 and float16 (in float32
    rounded once) only on a CPU oneDNN has them for (``mkldnn_bf16_device_check``
    / ``mkldnn_fp16_device_check``: an AMD EPYC without AVX512-FP16 runs float16
    in ATen's kernel). Not read: the ``torch.backends.mkldnn`` switch (with it
    off eager runs ATen's kernel for those too; a recorded lowering would not
    see it change)."""
    if not (x.is_contiguous() and x.numel() > 1):
        return False
    if x.dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if x.dtype == torch.float16:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return x.dtype == torch.float32


def _gelu_composite(x, approximate, k):
    """torch._decomp's gelu (``torch._refs.nn.functional.gelu``) in ``x``'s type."""
    if approximate == "tanh":
        inner = apply("mul", k(0.7978845608028654), apply("add", x, apply(
            "mul", k(0.044715), apply("mul", apply("mul", x, x), x))))
        return apply("mul", apply("mul", k(0.5), x), apply("add", k(1), apply("tanh", inner)))
    return apply("mul", apply("mul", x, k(0.5)), apply("add", k(1), apply("erf", apply(
        "mul", x, k(0.70710678118654752440)))))


@lowers(aten.silu_backward.default)
def _silu_backward(ctx, grad, x):
    """Eager's kernel: ``s = 1 / (1 + exp(-x))``, ``(grad * s) * (1 + x * (1 -
    s))`` with ``1 + x * (1 - s)`` one fused multiply-add (the compiler
    contracts it), float16/bfloat16 in float32 rounded once. Probed: the
    unfused form was 823 of 4,096 float32 gradients off, the fused one 157
    (all from exp), SLEEF's exp 0. Where ``s`` is subnormal (x < -87.34)
    XLA's CPU backend flushes it. F.silu forward + backward records 14 nodes
    (11 replayed; 129 and 76 with SLEEF's steps as frontend nodes)."""
    found = _in_kernel_type(ctx, grad, x)
    if found is None:
        return NotImplemented
    dt, (grad, x) = found
    one = const(1, dt, ctx.device, ctx.shape)
    s = _sigmoid_as_eager(x)
    rest = fused_multiply_add(x, apply("sub", one, s), one)
    return convert(apply("mul", apply("mul", grad, s), rest), ctx.dtype)


@lowers(aten.mish_backward.default)
def _mish_backward(ctx, grad, x):
    """Eager's kernel's order: ``s = 1 / (1 + exp(-x))``, ``t =
    tanh(log1p(exp(x)))``, ``grad * (t + (x * s) * (1 - t * t))`` with the
    two multiply-adds fused (probed: of 4,096 float32 gradients 1,473 off
    unfused, 288 fused), float16/bfloat16 in float32 rounded once. ``s`` and
    ``t`` take SLEEF's exp (one node each); ``t``'s tanh and log1p are XLA's
    (eager's SLEEF tanh and log1p are not reproduced): float32 stays off in
    174 of 4,096 of N(0, 36) (182 with XLA's exp in ``t``), bfloat16 0,
    float16 1. F.mish forward + backward records 29 nodes (24 replayed; 144
    and 89 with SLEEF's steps as frontend nodes)."""
    found = _in_kernel_type(ctx, grad, x)
    if found is None:
        return NotImplemented
    dt, (grad, x) = found
    one = const(1, dt, ctx.device, ctx.shape)
    s = _sigmoid_as_eager(x)
    t = apply("tanh", apply("log1p", _exp_as_eager(x)))
    rest = fused_multiply_add(apply("neg", t), t, one)
    inner = fused_multiply_add(apply("mul", x, s), rest, t)
    return convert(apply("mul", grad, inner), ctx.dtype)



@lowers(aten.gelu_backward.default)
def _gelu_backward(ctx, grad, x, approximate="none"):
    """Eager's CPU kernel's order, float16/bfloat16 in float32 rounded once.
    'tanh': ``t = tanh(beta * fma(kappa, x**3, x))``, ``grad * ((0.5 * x *
    fma(-t, t, 1)) * (beta * fma(3 * kappa, x**2, 1)) + 0.5 * (1 + t))``,
    the last sum unfused (probed over the 16 fused/unfused choices): float32
    1,461 -> 27 of 4,096 off (eager's SLEEF tanh left), float16 29 -> 15,
    float64 2,509 -> 1,842. 'none': ``grad * fma(x, pdf, cdf)``; where eager
    runs ATen's kernel (a strided ``x``; a contiguous one goes to oneDNN's
    backward, not modelled) float32/bfloat16/float16 take its vector loop's
    ``Vectorized<float>::erf`` (:func:`_erf_vector`) and SLEEF's exp, the
    scalar tail float64's erf and exp rounded: 32,391 of 49,152 float32 off ->
    0 at 64x768 views (tails: glibc's erff/expf, an ulp off in a few);
    elsewhere XLA's exp and erf (float64 805 -> 541 by the fused form). F.gelu forward + backward records
    50 nodes for 'tanh' (32 before), 27 for 'none' (23)."""
    found = _in_kernel_type(ctx, grad, x)
    if found is None:
        return NotImplemented
    dt, (grad, x) = found
    dev = ctx.device

    def k(v):
        return const(v, dt, dev, ctx.shape)

    if approximate == "tanh":
        beta = k(1.41421356237309504880 * 1.12837916709551257390 * 0.5)
        kappa = k(0.044715)
        x_sq = apply("mul", x, x)
        x_cube = apply("mul", x_sq, x)
        t = apply("tanh", apply("mul", beta, fused_multiply_add(kappa, x_cube, x)))
        left = apply("mul", k(0.5), x)
        left_derivative = apply("mul", k(0.5), apply("add", k(1), t))
        tanh_derivative = fused_multiply_add(apply("neg", t), t, k(1))
        inner_derivative = apply("mul", beta, fused_multiply_add(apply("mul", k(3), kappa), x_sq, k(1)))
        inner = apply("add", apply("mul", apply("mul", left, tanh_derivative), inner_derivative), left_derivative)
        return convert(apply("mul", grad, inner), ctx.dtype)
    def inner_of(erf, exp):
        cdf = apply("mul", k(0.5), apply("add", k(1), erf(apply("mul", x, k(0.70710678118654752440)))))
        pdf = apply("mul", k(1.12837916709551257390 * 0.70710678118654752440 * 0.5),
                    exp(apply("mul", apply("mul", x, x), k(-0.5))))
        if ctx.dtype in ("f16", "bf16"):
            # the reduced types' loop converts to Vectorized<float> and adds
            # cdf + x * pdf unfused (fused: 6 of 49,152 float16 off near gelu' = 0)
            return apply("add", cdf, apply("mul", x, pdf))
        return fused_multiply_add(x, pdf, cdf)

    inner = None
    x_meta = ctx.margs[1]
    by_onednn = _onednn_takes(x_meta)
    if dt == "f32" and by_onednn and gelu_onednn.backward_in_eager():
        inner = gelu_onednn.gelu_erf_derivative(x)
    elif dt == "f32" and not by_onednn:
        inner = _vector_or_tail(ctx, lambda: inner_of(_erf_vector, lambda v: apply("exp_sleef", v)),
                                lambda: inner_of(lambda v: convert(apply("erf", convert(v, "f64")), "f32"), _tail_exp),
                                grain=_gelu_grain(ctx), operands=2)
    if inner is None:
        inner = inner_of(lambda v: apply("erf", v), lambda v: apply("exp", v))
    return convert(apply("mul", grad, inner), ctx.dtype)


@lowers(aten._weight_norm_interface_backward.default)
def _weight_norm_backward(ctx, grad_w, v, g, norms, dim):
    """``weight_norm``'s backward (``w = g * v / ||v||``, the norm over every
    dim but ``dim``), as eager's CPU kernel computes it, in the norms' float
    type: ``a = g / n``, ``grad_g = sum(grad_w * v) / n``, ``grad_v = a * grad_w
    - (a * sum / (n * n)) * v``. (It fell back: a read mid-step, every step of
    a model with ``parametrizations.weight_norm`` or ``nn.utils.weight_norm``.)"""
    shape = tuple(v.shape)
    kept = tuple(ctx.out[1].shape)
    acc = norms.dtype
    gw, vv = convert(grad_w, acc), convert(v, acc)
    n = reshape(convert(norms, acc), kept)
    over = tuple(i for i in range(len(shape)) if i != dim % len(shape))
    prod = apply("mul", gw, vv)
    total = reshape(apply("reduce_sum", prod, dims=over) if over else prod, kept)
    a = apply("div", reshape(convert(g, acc), kept), n)
    b = apply("div", apply("mul", a, total), apply("mul", n, n))
    grad_v = apply("sub", apply("mul", broadcast(a, shape), gw), apply("mul", broadcast(b, shape), vv))
    grad_g = apply("div", total, n)
    return convert(grad_v, lazy_dtype(ctx.out[0].dtype)), convert(grad_g, lazy_dtype(ctx.out[1].dtype))


# --- losses -------------------------------------------------------------------------------

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _targets(t, c: int, ignore_index: int):
    """Eager's IndexError for a target outside ``0..c-1`` that is not ``ignore_index``
    (a value check: :func:`.indexing.checked`)."""
    return checked(t, c, "nll_loss(): Target {index} is out of bounds.", "IndexError", ignore=ignore_index)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _nll_parts(ctx, x, target, weight, ignore_index):
    """(rows of x as (N, C), one-hot of the targets, per-row weight) for nll_loss."""
    dt = x.dtype
    if len(x.shape) > 2:  # nll_loss2d: (N, C, d1, ...) -> (N * d1 * ..., C)
        perm = (0,) + tuple(range(2, len(x.shape))) + (1,)
        c = x.shape[1]
        x = reshape(apply("permute", x, dims=perm), (_numel(x.shape) // c if c else 0, c))
    rows = x if len(x.shape) == 2 else reshape(x, (1, x.shape[0]))
    n, c = rows.shape
    t = _targets(reshape(convert(target, "i64"), (n,)), c, ignore_index)
    classes = apply("iota", dim=1, shape=(n, c), dtype="i64", device=ctx.device)
    tb = broadcast(reshape(t, (n, 1)), (n, c))
    hit = apply("compare", classes, tb, direction="EQ")
    kept = apply("compare", t, const(ignore_index, "i64", ctx.device, (n,)), direction="NE")
    hit = apply("and", hit, broadcast(reshape(kept, (n, 1)), (n, c)))
    if weight is None:
        w = convert(kept, dt)
    else:
        wb = broadcast(reshape(convert(weight, dt), (1, c)), (n, c))
        w = apply("reduce_sum", apply("select", hit, wb, const(0, dt, ctx.device, (n, c))), dims=(1,))
    return rows, hit, w


@lowers(aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
def _nll_loss_backward(ctx, grad, x, target, weight, reduction, ignore_index, total_weight):
    rows, hit, w = _nll_parts(ctx, x, target, weight, ignore_index)
    n, c = rows.shape
    dt = rows.dtype
    kind = _REDUCTIONS[reduction]
    g = convert(grad, dt)
    if kind == "none":
        g = reshape(g, (n,))
    else:
        if kind == "mean":
            g = apply("div", g, convert(total_weight, dt))
        g = broadcast(reshape(g, ()), (n,))
    per_row = apply("neg", apply("mul", g, w))
    out = apply("select", hit, broadcast(reshape(per_row, (n, 1)), (n, c)), const(0, dt, ctx.device, (n, c)))
    if len(ctx.shape) > 2:  # nll_loss2d: back from (N * d1 * ..., C) to (N, C, d1, ...)
        rest = tuple(ctx.shape[2:])
        out = reshape(out, (ctx.shape[0],) + rest + (c,))
        k = len(ctx.shape)
        out = apply("permute", out, dims=(0, k - 1) + tuple(range(1, k - 1)))
    return reshape(out, ctx.shape)


@lowers(aten.embedding.default)
def _embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``weight[indices]``: rows gathered; eager's IndexError for an index outside
    ``0..n-1`` a value check (negatives wrap when checks are off, as index_select did)."""
    n, width = weight.shape
    k = 1
    for s in indices.shape:
        k *= s
    if k == 0 or n == 0:
        return NotImplemented if k else const(0, ctx.dtype, ctx.device, ctx.shape)
    index = checked(reshape(convert(indices, "i64"), (k,)), n, "embedding(): index out of range in self", "IndexError")
    g = apply(
        "gather", weight, reshape(_wrap(index, n), (k, 1)),
        offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(), start_indices_batching_dims=(),
        start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, width), indices_are_sorted=False,
    )
    return reshape(g, ctx.shape)


@lowers(aten.mse_loss.default)
def _mse_loss(ctx, x, target, reduction=1):
    dt = ctx.dtype
    shape = tuple(torch.broadcast_shapes(tuple(ctx.margs[0].shape), tuple(ctx.margs[1].shape)))
    d = apply("sub", operand(x, dt, shape, ctx.device), operand(target, dt, shape, ctx.device))
    sq = apply("mul", d, d)
    kind = _REDUCTIONS[reduction]
    if kind == "none" or sq.shape == ():
        return reshape(sq, ctx.shape) if kind != "mean" or sq.shape == () else sq
    total = apply("reduce_sum", sq, dims=tuple(range(len(shape))))
    if kind == "mean":
        count = 1
        for s in shape:
            count *= s
        total = apply("div", total, const(count, dt, ctx.device))
    return total


@lowers(aten.mse_loss_backward.default)
def _mse_loss_backward(ctx, grad, x, target, reduction):
    dt = ctx.dtype
    d = apply("sub", operand(x, dt, ctx.shape, ctx.device), operand(target, dt, ctx.shape, ctx.device))
    g = operand(grad, dt, ctx.shape, ctx.device)
    scale = 2.0
    if _REDUCTIONS[reduction] == "mean":
        count = 1
        for s in ctx.margs[1].shape:
            count *= s
        scale = 2.0 / max(count, 1)
    return apply("mul", apply("mul", d, g), const(scale, dt, ctx.device, ctx.shape))


# --- optimizer updates --------------------------------------------------------------------


@lowers(aten.addcmul.default, aten.addcdiv.default)
def _addc(ctx, x, t1, t2, value=1):
    """x + value * t1 * t2 or x + value * t1 / t2, rounded as eager's CPU
    kernels round them: in a half's opmath (float32), ``value * t1`` first,
    then addcdiv's ``/ t2`` and ``+ x`` each rounded, and addcmul's ``* t2 +
    x`` one fused multiply-add (eager's vectorized loop and its tail both
    call ``fmadd``; :func:`fused_multiply_add`)."""
    if ctx.out.dtype is torch.complex32:
        x, t1, t2 = (operand(v, ctx.dtype, ctx.shape, ctx.device) for v in (x, t1, t2))
        # eager's complex<Half> kernel: x + round(round(value * t1) * t2), each step rounded
        if value != 1:
            value = chalf_rounded(scalar(check_chalf(value), ctx.dtype, ctx.device, ctx.shape))
            t1 = chalf_rounded(apply("mul", t1, value))
        return apply("add", x, chalf_rounded(apply("mul" if ctx.func_name == "addcmul" else "div", t1, t2)))
    dt = ctx.dtype
    if dt not in _OPMATH:  # complex, integers: the order rounds nothing otherwise (complex: as it was)
        x, t1, t2 = (operand(v, dt, ctx.shape, ctx.device) for v in (x, t1, t2))
        term = apply("mul" if ctx.func_name == "addcmul" else "div", t1, t2)
        if value != 1:
            term = apply("mul", term, scalar(value, dt, ctx.device, ctx.shape))
        return apply("add", x, term)
    acc = _OPMATH[dt]
    x, t1, t2 = (operand(v, acc, ctx.shape, ctx.device) for v in (x, t1, t2))
    if value != 1:
        t1 = apply("mul", t1, scalar(value, acc, ctx.device, ctx.shape))
    if ctx.func_name == "addcdiv":
        out = apply("add", x, apply("div", t1, t2))
    else:
        out = fused_multiply_add(t1, t2, x)
    return convert(out, dt)


_OPMATH = {"f16": "f32", "bf16": "f32", "f32": "f32", "f64": "f64"}
"""The real float types whose addcmul and addcdiv round as eager's CPU kernels,
and the type those compute in."""


def fma(ctx, a, b, c):
    """``prims.fma``: a * b + c. Dynamo writes ``addcmul_`` with a value so;
    the op exists once torch._inductor is loaded, and the torch.compile
    backend (:mod:`..dynamo`) registers this lowering for it then."""
    a, b, c = (operand(v, ctx.dtype, ctx.shape, ctx.device) for v in (a, b, c))
    if ctx.dtype in ("f32", "f64"):  # (inductor's prims.fma: "without rounding after the multiplication")
        return fused_multiply_add(a, b, c)
    return apply("add", apply("mul", a, b), c)


@lowers(aten.lerp.Scalar, aten.lerp.Tensor)
def _lerp(ctx, x, end, weight):
    # bfloat16 and float16 compute in float32 and round once, as eager's kernel (its opmath type)
    # does: timm's AdafactorBigVision keeps its momentum in bfloat16 (exp_avg.lerp_(update, 0.1))
    dt = "f32" if ctx.dtype in ("bf16", "f16") else ctx.dtype
    x, end = operand(x, dt, ctx.shape, ctx.device), operand(end, dt, ctx.shape, ctx.device)
    number = isinstance(weight, (int, float))
    if number and dt in ("f32", "f64"):
        # a Python weight is a parameter whatever its value, and the side is
        # chosen on the device: an EMA's weight (timm's ModelEmaV3: 1.0 for
        # its first updates, then 1 - decay) keeps one program
        w = broadcast(core.scalar(float(weight), dt, ctx.device, fold=False), ctx.shape)
        number = False
    else:
        w = operand(weight, dt, ctx.shape, ctx.device)
    diff = apply("sub", end, x)
    # eager's two-sided formula keeps lerp(a, b, 1) == b exactly; in float32
    # and float64 each side is one fused multiply-add, eager's vectorized
    # fmadd(weight < 0.5 ? weight : weight - 1, end - x, weight < 0.5 ? x : end)
    one = const(1, dt, ctx.device, ctx.shape)
    if number:  # (float16/bfloat16 weights are parameters above, so only other types reach here)
        if abs(weight) < 0.5:
            return apply("add", x, apply("mul", w, diff))
        return apply("sub", end, apply("mul", diff, apply("sub", one, w)))
    size = apply("abs", w)  # real for a complex weight
    small = apply("compare", size, const(0.5, size.dtype, ctx.device, ctx.shape), direction="LT")
    if dt in ("f32", "f64"):
        # the side is chosen before the one fused multiply-add, as eager's
        # kernel does: AdamW's exp_avg.lerp_ then costs one fma an
        # element, not two and a select
        coef = apply("select", small, w, apply("sub", w, one))
        return convert(fused_multiply_add(coef, diff, apply("select", small, x, end)), ctx.dtype)
    low = apply("add", x, apply("mul", w, diff))
    high = apply("sub", end, apply("mul", diff, apply("sub", one, w)))
    return convert(apply("select", small, low, high), ctx.dtype)


# --- layer norm ----------------------------------------------------------------------------------


def _layer_moments(h, ds, kept, platform):
    """Layer norm's mean and variance of ``h`` over ``ds`` (shaped ``kept``), and
    ``h`` less the mean. A float32 row on a platform with float64 has its mean
    as its float64 sum over N, rounded once: no float32 row can overflow that
    sum, a constant row's mean is exact, and no mean exceeds the row's largest
    value (eager's Welford's properties, which :func:`.moments.row_moments`
    gets in float32 from a sum about the row's first element, retried scaled
    down where that overflows); an infinity or NaN in the row makes the mean
    NaN, as Welford's ``inf - inf`` does. 8 nodes for those 23, in a step of
    transformers with a layer norm or more a block."""
    if h.dtype != "f32" or platform not in WIDE_PLATFORMS:
        return row_moments(h, ds, kept)
    count = 1
    for d in ds:
        count *= h.shape[d]
    total = reshape(apply("reduce_sum", convert(h, "f64"), dims=ds), kept)
    total = apply("add", total, apply("sub", total, total))  # +-inf (an infinity in the row): NaN
    mean = convert(apply("div", total, const(count, "f64", h.device, kept)), "f32")
    centered = apply("sub", h, broadcast(mean, h.shape))
    squares = reshape(apply("reduce_sum", apply("mul", centered, centered), dims=ds), kept)
    return mean, apply("div", squares, const(count, "f32", h.device, kept)), centered


@lowers(aten.native_layer_norm.default)
def _native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    """The decomposition's formula ((x - mean) * rsqrt(var + eps), then weight and bias; halves
    computed in f32), with :func:`_layer_moments`' mean."""
    out_t, mean_t, rstd_t = ctx.out
    acc = "f32" if x.dtype in ("f16", "bf16") else x.dtype
    h = convert(x, acc)
    rank = len(h.shape)
    ds = tuple(range(rank - len(normalized_shape), rank))
    kept = tuple(1 if d in ds else n for d, n in enumerate(h.shape))
    mean, var, centered = _layer_moments(h, ds, kept, ctx.device.platform)
    rstd = apply("rsqrt", apply("add", var, scalar(eps, acc, ctx.device, kept)))
    out = apply("mul", centered, broadcast(rstd, h.shape))
    if weight is not None:
        out = apply("mul", out, operand(weight, acc, h.shape, ctx.device))
    if bias is not None:
        out = apply("add", out, operand(bias, acc, h.shape, ctx.device))
    return tuple(convert(reshape(v, tuple(t.shape)), lazy_dtype(t.dtype))
                 for v, t in ((out, out_t), (mean, mean_t), (rstd, rstd_t)))


# silu_backward is a composite op outside CPU and CUDA: the autograd key would
# run its pieces (``sigmoid``, ``mul``, ...) and this lowering would never see
# it. Lazy tensors take eager's CPU path instead: below autograd the op itself
# reaches the dispatcher (dispatch._KERNEL_LOWERED). With a gradient to record
# (double backward) the composite runs as before, its pieces differentiable.
# mish_backward likewise.
_AUTOGRAD_LIB = torch.library.Library("aten", "IMPL")


def _below_autograd(op):
    def kernel(*args):
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return op.decompose(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    return kernel


_AUTOGRAD_LIB.impl("silu_backward", _below_autograd(aten.silu_backward.default), "AutogradLazy")
_AUTOGRAD_LIB.impl("mish_backward", _below_autograd(aten.mish_backward.default), "AutogradLazy")
