"""A row's mean and variance as eager's kernels get them (layer norm's rows, var_mean's and
batch norm's statistics): no partial sum overflows where eager's running mean does not."""

from __future__ import annotations

from ..lowering import apply, broadcast, const, convert, reshape


def row_moments(x, ds, kept, correction=0):
    """Mean and variance over ``ds`` (results shaped ``kept``; the variance's divisor is the
    count less ``correction``, at least 0), the variance in two passes as the decomposition's
    var_mean, the mean as eager's kernel gets it; and ``x`` less the mean.

    Eager takes Welford's running mean, which is exact for a constant row and never exceeds
    the largest value. A plain sum over N is neither: a row of 3e38s sums to inf (mean inf,
    every output NaN, where eager gives 0 and rstd 1/sqrt(eps)), and a row of 2e19s gets a
    mean one ulp off, whose square dwarfs eps (outputs +-1, where eager gives 0). So the mean
    is taken about the row's first element, and where even the steps from it overflow, again
    in steps scaled down by a power of two (exact) so that no partial sum can: an infinity
    or NaN in the row makes it NaN, as in eager. The rows must not be empty."""
    count = 1
    for d in ds:
        count *= x.shape[d]
    first = apply("slice", x, start=(0,) * len(kept), limit=kept, strides=(1,) * len(kept))
    n = const(count, x.dtype, x.device, kept)

    def about_first(scale):
        xs, fs = x, first
        if scale != 1:
            xs = apply("mul", x, const(scale, x.dtype, x.device, x.shape))
            fs = apply("mul", first, const(scale, x.dtype, x.device, kept))
        steps = apply("sub", xs, broadcast(fs, x.shape))
        if scale != 1:  # an infinity makes the mean NaN, as it does Welford's (inf - inf)
            steps = apply("add", steps, apply("mul", xs, const(0, x.dtype, x.device, x.shape)))
        part = apply("div", reshape(apply("reduce_sum", steps, dims=ds), kept), n)
        if scale != 1:
            part = apply("mul", part, const(1 / scale, x.dtype, x.device, kept))
        return apply("add", first, part)

    mean = about_first(1)
    if count > 1:
        shift = 2.0 ** -(max(count - 1, 1).bit_length() + 1)  # 2^-k <= 1/(2 count): every |sum| <= max |x|
        mean = apply("select", apply("is_finite", mean), mean, about_first(shift))
    centered = apply("sub", x, broadcast(mean, x.shape))
    squares = apply("reduce_sum", apply("mul", centered, centered), dims=ds)
    divisor = n if correction == 0 else const(max(0, count - correction), x.dtype, x.device, kept)
    var = apply("div", reshape(squares, kept), divisor)
    return mean, var, centered



WIDE_PLATFORMS = frozenset({"cpu", "gpu"})
"""The platforms whose programs have float64: XLA on TPUs has none."""


def accumulator(dtype: str, platform: str) -> str:
    """The element type eager's CPU kernels sum a real ``dtype`` row's moments in: float64
    for float32, float16 and bfloat16 (``torch.var_mean``'s Welford in double, batch
    norm's ``acc_type<float>``), so that the statistics round once into ``dtype``; float32
    on a platform without float64; any other type itself."""
    if dtype in ("f32", "f16", "bf16"):
        return "f64" if platform in WIDE_PLATFORMS else "f32"
    return dtype


def _two_pass(h, ds, correction):
    count = 1
    for d in ds:
        count *= h.shape[d]
    kept = tuple(1 if d in ds else n for d, n in enumerate(h.shape))
    total = apply("reduce_sum", h, dims=ds) if ds else h
    mean = reshape(apply("div", total, const(count, h.dtype, h.device, total.shape)), kept)
    centered = apply("sub", h, broadcast(mean, h.shape))
    squares = apply("mul", centered, centered)
    sq_sum = apply("reduce_sum", squares, dims=ds) if ds else squares
    var = apply("div", sq_sum, const(max(0, count - correction), h.dtype, h.device, sq_sum.shape))
    return var, mean


def var_mean(x, ds, correction, acc):
    """``torch.var_mean`` of a real ``x`` over ``ds`` (kept as size-1 dimensions), in two
    passes; the variance's divisor is the count less ``correction``, at least 0.

    A float16/bfloat16 row is summed in ``acc`` (see :func:`accumulator`) and its results
    rounded once, as eager's. A float32 row keeps its float32 sums wherever they are
    finite, and only where they overflow (a row of 3e38s: (inf, inf), eager (0, 3e38))
    takes the ``acc`` sums: float64 sums throughout would be eager's to the bit (its
    kernels sum in double), but they round a ResNet's batch norm otherwise than the float32
    sums this lowering's users (benchmark 15's smoke run at XLA's -O0) were measured with,
    and there a downstream ReLU at a near-tie (-4.2e-6 in float64 at scale 5.4; eager
    -2.9e-6) flips, as the conv's own error (1.5-3x eager's, tests/zoo's KNOWN) allows."""
    if acc == x.dtype:
        return _two_pass(x, ds, correction)
    var, mean = (convert(t, x.dtype) for t in _two_pass(convert(x, acc), ds, correction))
    if x.dtype != "f32":
        return var, mean
    var32, mean32 = _two_pass(x, ds, correction)
    kept = mean32.shape
    ok = apply("and", apply("is_finite", reshape(var32, kept)), apply("is_finite", mean32))
    return (apply("select", reshape(ok, var32.shape), var32, var),
            apply("select", ok, mean32, mean))
