"""``gelu`` 'none' as oneDNN's AVX-512 eltwise kernel computes it, where eager
torch sends a contiguous float32 ``F.gelu`` (``Activation.cpp``, ``use_mkldnn``).

oneDNN v3.12 (bundled with torch 2.13), ``jit_uni_eltwise_injector``'s
``gelu_erf_minimax_approx_compute_vector_fwd`` on ``avx512_core``: ``erf(x /
sqrt(2))`` is a degree-5 polynomial in ``|x|`` chosen from 25 by the bits of
``|x|`` (two mantissa bits per binade: ``(bits(|x|) + IDX_BIAS) >> 21``,
clamped to [1, 24], polynomial 23 (the constant one) past ``RBOUND``),
evaluated by fused multiply-adds from the top coefficient; the sign of ``x``
is put back by its bit, then ``x * (1 + erf) * 0.5``. Probed against eager's
bits: 0 of 49,152 float32 of 2 * N(0, 1) off (the ATen kernel's form was
22,686 off); ``gelu(inf)`` is NaN there as in eager (``inf * 0`` in Horner's
first step).

On an AVX2 CPU (no ``avx512_core``) the forward is the Abramowitz-Stegun
form (``gelu_erf_compute_vector_fwd``, :func:`gelu_erf_abramowitz_stegun`):
``erf(x / sqrt(2))`` as the backward below computes it, then
``fma(erf, x * 0.5, x * 0.5)``. Probed there: 0 of 300,000 float32 of
3 * N(0, 1) off eager, infinities, NaN and subnormals too (the minimax form
was 34% off by an ulp; BERT's first activation to differ from eager).

Its backward (``gelu_erf_compute_vector_bwd``, every ISA alike) keeps the
Abramowitz-Stegun form: ``R = x / sqrt(2)``, ``Q = exp(-R * R)`` with oneDNN's
own exp (:func:`_exp`), ``erf(R) = sign(R) * (1 - Q * W * r(W))`` with ``W = 1 /
(p * |R| + 1)`` and ``r`` a quartic by fused multiply-adds, then ``(R / sqrt(pi)
* Q + 0.5) + 0.5 * erf`` fused, times the gradient (:func:`gelu_erf_derivative`).
Probed: 0 of 49,152 float32 gradients off eager (float16, bfloat16 too: the
float32 product rounded once); ``gelu'(+-inf)`` is NaN there as in eager.
"""

from __future__ import annotations

import numpy as np
import torch

from lazycore.ir.memo import Memo

from ..lowering import apply, const, convert, fused_multiply_add, reshape

IDX_BIAS = -0x3de00001
"""``0xc21fffff`` as an int32: added to ``|x|``'s bits before the shift."""

RBOUND = 0x40b15cee
"""The bits of the float32 past which erf is one (about 5.54)."""

COEFFICIENTS = np.array([
    (  # degree 0
        0xa6f2cb94, 0x32827792, 0x3381cc0c, 0x34523d4a, 0x351ac44d,
        0x35f36d88, 0x36ee8229, 0x37b8a3bb, 0x3867a213, 0x3940033b,
        0x3a2a5a1d, 0x3ae35863, 0x3b7828f2, 0x3c08b14b, 0x3c515ed3,
        0xbb503236, 0xbd8d8e5e, 0xbe8abcd9, 0xbf0c19a2, 0xbeccb328,
        0x3e176ced, 0x3f470d99, 0x3f7abb28, 0x3f800000, 0x00000000,
    ),
    (  # degree 1
        0x3f4c422a, 0x3f4c421f, 0x3f4c4207, 0x3f4c41cb, 0x3f4c413b,
        0x3f4c3fad, 0x3f4c3a2f, 0x3f4c2d40, 0x3f4c146a, 0x3f4bc341,
        0x3f4ad08c, 0x3f48f8cf, 0x3f45fac7, 0x3f404e07, 0x3f3b980f,
        0x3f48dff3, 0x3f78b21b, 0x3fbb0704, 0x40019c32, 0x3fe536d6,
        0x3f81331e, 0x3e6c8684, 0x3c98f936, 0x00000000, 0x3f800000,
    ),
    (  # degree 2
        0xb62173f4, 0x3735e4cf, 0x37f2ff89, 0x388c23be, 0x3917535c,
        0x39ab2ab0, 0x3a60fadb, 0x3af9b960, 0x3b6e5491, 0x3c0a4ec5,
        0x3ca5aa8c, 0x3d2138d9, 0x3d8737d4, 0x3ddfb660, 0x3e0f27ab,
        0x3d94004b, 0xbe0efdeb, 0xbf1d96c3, 0xbf89db58, 0xbf6d9897,
        0xbef69fb8, 0xbdc4f8a8, 0xbbde6422, 0x00000000, 0x00000000,
    ),
    (  # degree 3
        0xbe081a19, 0xbe084570, 0xbe08639b, 0xbe089837, 0xbe08f409,
        0xbe09ab95, 0xbe0b66d0, 0xbe0e400a, 0xbe124df8, 0xbe1bde02,
        0xbe2f19c9, 0xbe4931bf, 0xbe685fbc, 0xbe89c95f, 0xbe96cbca,
        0xbe8044aa, 0xbe0550f2, 0x3dcfd6a1, 0x3e94c826, 0x3e79345f,
        0x3decec91, 0x3ca46568, 0x3aa1e00a, 0x00000000, 0x00000000,
    ),
    (  # degree 4
        0xba3d61db, 0x39f097a3, 0x3a5845dc, 0x3ab1fa35, 0x3b0cefb8,
        0x3b653ab6, 0x3bcae527, 0x3c221712, 0x3c6c5840, 0x3cc0a703,
        0x3d1dcc19, 0x3d63656d, 0x3d955907, 0x3dbf9910, 0x3dd53f69,
        0x3db7dcef, 0x3d639ebe, 0xba6ede48, 0xbd22be69, 0xbd041cf1,
        0xbc64f5ab, 0xbb097a32, 0xb8ebf380, 0x00000000, 0x00000000,
    ),
    (  # degree 5
        0x3cb7d80c, 0x3c9b6050, 0x3c978d11, 0x3c92e850, 0x3c8d058b,
        0x3c848454, 0x3c6cd623, 0x3c4c824b, 0x3c2a7935, 0x3be0b390,
        0x3b0651ac, 0xbb232f53, 0xbbd42fa0, 0xbc2c5366, 0xbc492c9e,
        0xbc2a7aa6, 0xbbd55d04, 0xba823a76, 0x3b102aa8, 0x3ae25a7e,
        0x3a31f792, 0x38b84375, 0x3689bb5a, 0x00000000, 0x00000000,
    ),
], np.uint32).view(np.float32)
"""``[degree, polynomial]``: oneDNN's ``gelu_erf_minimax_pol`` table (25 polynomials)."""


_ASKED = Memo("torch.gelu_onednn_minimax", 2)
"""``"forward"``/``"backward"`` -> whether eager's contiguous float32 gelu
(its backward) is this form (asked once each)."""

_AS = {"p": 0x3ea7ba05, "one_over_sqrt_two": 0x3f3504f3, "one_over_sqrt_pi": 0x3f106eba}
"""oneDNN's ``gelu_erf_Abramowitz_Stegun_consts`` (bits)."""

AS_POLYNOMIAL = np.array([0x3e827906, 0xbe91a98e, 0x3fb5f0e3, 0xbfba00e3, 0x3f87dc22], np.uint32).view(np.float32)
"""``gelu_erf_Abramowitz_Stegun_pol``: p1..p5 (0.254829592, .., 1.061405429)."""

_EXP = {"log2ef": 0x3fb8aa3b, "ln_flt_max": 0x42b17218, "ln_flt_min": 0xc2aeac50, "ln2": 0x3f317218}
"""oneDNN's ``exp_consts`` and ``ln2f`` (bits)."""

EXP_POLYNOMIAL = np.array([0x3f7ffffb, 0x3efffee3, 0x3e2aad40, 0x3d2b9d0d, 0x3c07cfce], np.uint32).view(np.float32)
"""``exp_pol``: p1..p5 of ``exp(r)`` on ``|r| <= ln(2) / 2`` (p0 is one)."""


def _f32(bits: int) -> np.float32:
    return np.uint32(bits).view(np.float32)


def forward_form():
    """Eager's contiguous float32 ``F.gelu`` here: :func:`gelu_erf` (oneDNN
    takes its minimax form on ``avx512_core``), :func:`gelu_erf_abramowitz_stegun`
    (on AVX2), or None (neither). Asked of eager on 2,049 values across every
    polynomial, against each form in NumPy."""
    known = _ASKED.get("forward")
    if known is None:
        x = _probe_values()
        want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy().view(np.int32)
        known = next((form for form, model in ((gelu_erf, _in_numpy), (gelu_erf_abramowitz_stegun, _as_in_numpy))
                      if (want == model(x).view(np.int32)).all()), False)
        _ASKED.put("forward", known)
    return known or None


def backward_in_eager() -> bool:
    """Whether eager's ``gelu_backward`` of a contiguous float32 ``x`` here is
    :func:`gelu_erf_derivative` times the gradient: asked of eager on the
    values :func:`in_eager` asks, against the form in NumPy."""
    known = _ASKED.get("backward")
    if known is None:
        x = _probe_values()
        grad = np.linspace(-3, 3, x.size, dtype=np.float32)
        want = torch.ops.aten.gelu_backward(torch.from_numpy(grad), torch.from_numpy(x)).numpy()
        got = (_derivative_in_numpy(x).astype(np.float64) * grad).astype(np.float32)
        known = bool((want.view(np.int32) == got.view(np.int32)).all())
        _ASKED.put("backward", known)
    return known


def _probe_values() -> np.ndarray:
    return np.concatenate([np.linspace(-6, 6, 1025, dtype=np.float32),
                           np.float32(2) ** np.linspace(-40, 3, 1024, dtype=np.float32)])


def _fma_in_numpy(a, b, c) -> np.ndarray:
    """``a * b + c`` rounded to float32 from float64 (the product is exact there)."""
    return (np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32)
            + np.asarray(c, np.float32)).astype(np.float32)


def _exp_in_numpy(s: np.ndarray) -> np.ndarray:
    under = s < _f32(_EXP["ln_flt_min"])
    s = np.where(s < _f32(_EXP["ln_flt_max"]), s, _f32(_EXP["ln_flt_max"]))
    s = np.where(s > _f32(_EXP["ln_flt_min"]), s, _f32(_EXP["ln_flt_min"]))
    n = np.floor(s * _f32(_EXP["log2ef"]) + np.float32(0.5))
    r = _fma_in_numpy(-n, _f32(_EXP["ln2"]), s)
    scale = np.where(under, np.float32(0), ((n - 1).astype(np.int32) + 127 << 23).view(np.float32))
    p = np.full_like(s, EXP_POLYNOMIAL[4])
    for c in (*EXP_POLYNOMIAL[3::-1], np.float32(1)):
        p = _fma_in_numpy(p, r, c)
    return (p * scale) * np.float32(2)


def _as_erf_in_numpy(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = _exp_in_numpy(-(r * r))
    w = np.float32(1) / _fma_in_numpy(_f32(_AS["p"]), np.abs(r), np.float32(1))
    p = np.full_like(r, AS_POLYNOMIAL[4])
    for c in AS_POLYNOMIAL[3::-1]:
        p = _fma_in_numpy(p, w, c)
    erf = _fma_in_numpy(-q * w, p, np.float32(1))
    return (erf.view(np.int32) ^ (r.view(np.int32) & np.int32(-0x80000000))).view(np.float32), q


def _derivative_in_numpy(x: np.ndarray) -> np.ndarray:
    r = x * _f32(_AS["one_over_sqrt_two"])
    erf, q = _as_erf_in_numpy(r)
    t = (r * _f32(_AS["one_over_sqrt_pi"])) * q
    return _fma_in_numpy(erf, np.float32(0.5), t + np.float32(0.5))


def _as_in_numpy(x: np.ndarray) -> np.ndarray:
    erf, _ = _as_erf_in_numpy(x * _f32(_AS["one_over_sqrt_two"]))
    half = x * np.float32(0.5)
    return _fma_in_numpy(erf, half, half)


def _in_numpy(x: np.ndarray) -> np.ndarray:
    """The form in NumPy (a fused multiply-add as float64's product and sum
    rounded: exact for these coefficients' products, the sum rounded twice
    only at a float64 tie, which the probe's values do not meet)."""
    bits = x.view(np.int32)
    positive = (bits & 0x7fffffff).view(np.float32)
    index = ((positive.view(np.int32).astype(np.int64) + IDX_BIAS).astype(np.int32)) >> 21
    index = np.minimum(np.maximum(index, 1), 24)
    index = np.where(np.uint32(RBOUND).view(np.float32) < positive, 23, index)
    pol = COEFFICIENTS[5][index]
    for degree in range(4, -1, -1):
        pol = (pol.astype(np.float64) * positive + COEFFICIENTS[degree][index]).astype(np.float32)
    erf = (pol.view(np.int32) ^ (bits & np.int32(-0x80000000))).view(np.float32)
    return ((x * (erf + np.float32(1))) * np.float32(0.5)).astype(np.float32)


def gelu_erf(x):
    """oneDNN's ``gelu_erf`` of the float32 ``x`` (any shape)."""
    shape, device = x.shape, x.device

    def i32(v):
        return const(np.int32(v), "i32", device, shape)

    bits = apply("bitcast_convert", x, dtype="i32")
    positive_bits = apply("and", bits, i32(0x7fffffff))
    positive = apply("bitcast_convert", positive_bits, dtype="f32")
    index = apply("shift_right", apply("add", positive_bits, i32(IDX_BIAS)), i32(21))
    index = apply("minimum", apply("maximum", index, i32(1)), i32(24))
    bound = const(np.uint32(RBOUND).view(np.float32), "f32", device, shape)
    index = apply("select", apply("compare", bound, positive, direction="LT"), i32(23), index)
    coefficients = _looked_up(index)
    pol = coefficients[5]
    for degree in range(4, -1, -1):
        pol = fused_multiply_add(pol, positive, coefficients[degree])
    sign = apply("and", bits, i32(-0x80000000))
    erf = apply("bitcast_convert", apply("xor", apply("bitcast_convert", pol, dtype="i32"), sign), dtype="f32")
    one_plus = apply("add", erf, const(1.0, "f32", device, shape))
    return apply("mul", apply("mul", x, one_plus), const(0.5, "f32", device, shape))


def _looked_up(index):
    """The six coefficients of polynomial ``index`` (i32, any shape), one gather
    from the ``[polynomial, degree]`` table."""
    shape = index.shape
    k = int(np.prod(shape, dtype=np.int64))
    table = const(np.ascontiguousarray(COEFFICIENTS.T), "f32", index.device)
    rows = apply("gather", table, reshape(index, (k, 1)), offset_dims=(1,), collapsed_slice_dims=(0,),
                 operand_batching_dims=(), start_indices_batching_dims=(), start_index_map=(0,),
                 index_vector_dim=1, slice_sizes=(1, 6), indices_are_sorted=False)
    return [reshape(apply("slice", rows, start=(0, d), limit=(k, d + 1), strides=(1, 1)), shape) for d in range(6)]


def _exp(s):
    """oneDNN's ``exp_compute_vector_fwd`` of the float32 ``s``: clamped to
    ``[ln(FLT_MIN), ln(FLT_MAX)]`` as ``minps``/``maxps`` do (the bound where
    ``s`` is NaN), ``n = floor(s * log2(e) + 0.5)``, ``r = s - n * ln2`` fused,
    a degree-5 polynomial by fused multiply-adds, times ``2**(n - 1)`` (zero
    below ``ln(FLT_MIN)``) and then 2."""
    shape, device = s.shape, s.device

    def f(bits_or_value, dtype="f32"):
        v = _f32(bits_or_value) if isinstance(bits_or_value, int) and dtype == "f32" else bits_or_value
        return const(v, dtype, device, shape)

    under = apply("compare", s, f(_EXP["ln_flt_min"]), direction="LT")
    s = apply("select", apply("compare", s, f(_EXP["ln_flt_max"]), direction="LT"), s, f(_EXP["ln_flt_max"]))
    s = apply("select", apply("compare", s, f(_EXP["ln_flt_min"]), direction="GT"), s, f(_EXP["ln_flt_min"]))
    n = apply("floor", apply("add", apply("mul", s, f(_EXP["log2ef"])), f(0.5)))
    r = fused_multiply_add(apply("neg", n), f(_EXP["ln2"]), s)
    power = apply("convert", apply("sub", n, f(1.0)), dtype="i32")
    scale = apply("bitcast_convert", apply("shift_left", apply("add", power, f(np.int32(127), "i32")),
                                           f(np.int32(23), "i32")), dtype="f32")
    scale = apply("select", under, f(0.0), scale)
    p = f(float(EXP_POLYNOMIAL[4]))
    for c in (*EXP_POLYNOMIAL[3::-1], np.float32(1)):
        p = fused_multiply_add(p, r, f(float(c)))
    return apply("mul", apply("mul", p, scale), f(2.0))


def gelu_erf_derivative(x):
    """oneDNN's ``gelu_erf`` backward factor of the float32 ``x``: the eltwise
    kernel's ``diff_src`` is this times ``diff_dst``."""
    shape, device = x.shape, x.device

    def f(v):
        return const(_f32(v) if isinstance(v, int) else v, "f32", device, shape)

    r = apply("mul", x, f(_AS["one_over_sqrt_two"]))
    erf, q = _as_erf(r)
    # r / sqrt(pi) as float64's exact product rounded: a float32 product by a constant of
    # r = x * constant is folded by XLA's simplifier into x * (its constants' product)
    scaled = convert(apply("mul", convert(r, "f64"), const(float(_f32(_AS["one_over_sqrt_pi"])), "f64", device, shape)),
                     "f32")
    t = apply("mul", scaled, q)
    return fused_multiply_add(erf, f(0.5), apply("add", t, f(0.5)))


def _as_erf(r):
    """``(erf(r), exp(-r * r))`` of the float32 ``r`` in oneDNN's Abramowitz-Stegun
    form: ``W = 1 / (p * |r| + 1)``, a quartic ``P(W)`` by fused multiply-adds,
    ``erf = sign(r) * fma(-exp(-r * r) * W, P, 1)``."""
    shape, device = r.shape, r.device

    def f(v):
        return const(_f32(v) if isinstance(v, int) else v, "f32", device, shape)

    q = _exp(apply("neg", apply("mul", r, r)))
    w = apply("div", f(1.0), fused_multiply_add(f(_AS["p"]), apply("abs", r), f(1.0)))
    p = f(float(AS_POLYNOMIAL[4]))
    for c in AS_POLYNOMIAL[3::-1]:
        p = fused_multiply_add(p, w, f(float(c)))
    erf = fused_multiply_add(apply("mul", apply("neg", q), w), p, f(1.0))
    sign = apply("and", apply("bitcast_convert", r, dtype="i32"), const(np.int32(-0x80000000), "i32", device, shape))
    return apply("bitcast_convert", apply("xor", apply("bitcast_convert", erf, dtype="i32"), sign), dtype="f32"), q


def gelu_erf_abramowitz_stegun(x):
    """oneDNN's ``gelu_erf`` forward of the float32 ``x`` on AVX2 (no
    ``avx512_core``): ``fma(erf(x / sqrt(2)), x * 0.5, x * 0.5)``, the erf
    :func:`_as_erf`'s."""
    erf, _ = _as_erf(apply("mul", x, const(_f32(_AS["one_over_sqrt_two"]), "f32", x.device, x.shape)))
    half = apply("mul", x, const(0.5, "f32", x.device, x.shape))
    return fused_multiply_add(erf, half, half)
