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
    """The element type ``torch.var_mean`` sums a real ``dtype`` row in; batch norm's
    backward sums in it too (conv.py), and so do the decomposition's statistics where
    ``batch_norm_stats`` does not take eager's CPU kernel (other platforms, inputs neither
    contiguous nor channels-last).

    Float16 and bfloat16 rows in float64 (float32 on a platform without it), rounded once
    into ``dtype``: eager's Welford runs in double, and their own type's sums were 0.4 off
    a bfloat16 variance. Float32 rows on the CPU in float64 too, as eager's CPU kernels sum
    them (Welford's ``acc_type<float, false>``, a double), so each result is eager's to the
    bit but where the double sums round to either side of a float32 tie, and a row of
    3e38s is eager's (0, 3e38). That also makes the statistics one rounding of a nearly
    exact sum, whatever order XLA sums in: the same bits whether the program runs N, C,
    H, W or channels-last (``lazy-channels-last``), where float32 sums moved whole
    channels by an ulp between the two layouts.
    (Training-mode batch norm on the CPU no longer comes here: ``batch_norm_stats``
    follows eager's kernel, its sums in the input's memory order. With it tests/zoo's
    resnet18 ends, after 4 steps, 6.2e-4 from eager float32 and 4.4e-4 from float64
    training, where eager float32 itself ends 5.7e-4 from float64; it was 1.1e-3 from
    float64 through these sums. How near eager a ResNet's training stays is chance at
    that scale: a ReLU input at -6e-7 in eager float32 is +4e-7 in float64 at its third
    step.)
    Float32 rows elsewhere (eager CUDA sums them in float32) and any other type sum in
    their own type."""
    if dtype in ("f16", "bf16"):
        return "f64" if platform in WIDE_PLATFORMS else "f32"
    if dtype == "f32" and platform == "cpu":
        return "f64"
    return dtype


def var_mean(x, ds, correction, acc, sqrt: bool = False, mean=None):
    """``torch.var_mean`` of a real ``x`` over ``ds``, the mean with those dimensions kept
    (size 1): two passes summed in ``acc`` (see :func:`accumulator`), each result rounded
    once into ``x``'s type; the variance's divisor is the count less ``correction``, at
    least 0. ``sqrt``: the standard deviation instead, its root taken in ``acc`` too
    (eager's ``take_sqrt``). ``mean``: the deviations are from this mean (of ``x``'s
    type, the reduced shape), not the one summed here."""
    h = convert(x, acc) if acc != x.dtype else x
    count = 1
    for d in ds:
        count *= h.shape[d]
    kept = tuple(1 if d in ds else n for d, n in enumerate(h.shape))
    if mean is None:
        total = apply("reduce_sum", h, dims=ds) if ds else h
        mean = apply("div", total, const(count, acc, h.device, total.shape))
    elif acc != x.dtype:
        mean = convert(mean, acc)
    centered = apply("sub", h, broadcast(reshape(mean, kept), h.shape))
    squares = apply("mul", centered, centered)
    sq_sum = apply("reduce_sum", squares, dims=ds) if ds else squares
    var = apply("div", sq_sum, const(max(0, count - correction), acc, h.device, sq_sum.shape))
    if sqrt:
        var = apply("sqrt", var)
    if acc != x.dtype:
        var, mean = convert(var, x.dtype), convert(mean, x.dtype)
    return var, mean
