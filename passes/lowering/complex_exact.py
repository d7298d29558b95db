"""Complex ``mul``, ``div``, ``abs`` and ``exp`` on real and imaginary parts, as eager's CPU kernels round them.

XLA's CPU backend expands a complex ``stablehlo.multiply`` (``divide``, ``abs``,
``exponential``) into real arithmetic that LLVM contracts into fused
multiply-adds, and ``lazy-keep-roundings``, which fences float products a sum
takes, never sees those products: 4,096 random complex64 ``a * b`` differed
from eager in 1,731 elements, ``a / b`` in 1,755, ``abs`` in 1,429, ``exp`` in
368 (complex128 alike). Here each op is built from its parts with the
roundings of eager torch's vectorized AVX512 kernels
(``aten/src/ATen/cpu/vec/vec512/vec512_complex_{float,double}.h``):

- ``mul``: ``(ac - bd) + (ad + bc)i``, each product rounded (``mul`` then
  ``hsub``, no fused multiply-add): the products are plain multiplies, which
  ``lazy-keep-roundings`` fences.
- ``div``: c10::complex's Smith division (``rat = d / c``,
  ``scl = 1 / (c + d * rat)``, ...), element by element, as GCC compiled it
  for the AVX512 kernel: each ``x + y * rat`` is one fused multiply-add
  (the same formula without them: 967 of 4,096 real parts off).
- ``abs``: Sleef's ``hypot`` (u05, within 0.5001 ulp): complex64 as
  ``sqrt(a*a + b*b)`` in float64 (products exact, one rounding more);
  complex128 as the correctly rounded ``hypot`` from an error-free sum of
  squares (Dekker's products give each square's rounding error).
- ``exp``: glibc's ``cexp`` (``std::exp`` of each element):
  ``exp(x) * cos(y) + exp(x) * sin(y) i``, each factor rounded to the type.
  complex64 takes the factors in float64, rounded (glibc's float ones are
  within an ulp but not always correctly rounded: 102 of 4,096 random
  elements still differ, 368 with XLA's complex exp; it costs about twice
  XLA's); complex128's factors are XLA's (542 of 4,096 differ, as before:
  XLA's float64 exp is not glibc's).

Values at infinities, NaN and zeros are those of the same kernels (the
``exp`` special lanes stay the built-in lowering's, C99's Annex G).
These are eager torch's roundings: NumPy's own loops round otherwise
(``mul`` as ``fma(a, c, -b*d) + fma(a, d, b*c) i``, Smith's division without
fused multiply-adds, ``abs`` as ``big * sqrt(fma(r, r, 1))``), so the NumPy
frontend's ``multiply``, ``square``, ``divide`` and ``absolute`` loops build
them from the parts (``frontends/numpy/complex_loops.py``) and record no
complex ``lazy.mul``, ``lazy.div`` or ``lazy.abs``; ``exp`` is glibc's ``cexp``
for both.

Installed over the built-in lowerings (:func:`install`, from
:func:`~.builtin.load_builtin_lowerings`): a real op goes to the built-in one.
"""

from __future__ import annotations

from lazycore.dialect import TensorType
from lazycore.dialect.mlir import ir
from lazycore.dialect.types import is_complex, is_float, real_dtype

from . import hlo
from .elementwise import fused_multiply_add
from .registry import BUILTIN, Lowering

_INF = float("inf")


def _parts(z):
    t = hlo.type_of(z)
    part = TensorType(t.shape, real_dtype(t.dtype))
    return hlo.value("real", [z], part), hlo.value("imag", [z], part)


def _complex(re, im, result_type):
    return hlo.value("complex", [re, im], result_type)


def _mul(a, b, result_type):
    x, y = _parts(a)
    u, v = _parts(b)
    re = hlo.binary("subtract", hlo.binary("multiply", x, u), hlo.binary("multiply", y, v))
    # ad - (-(bc)), as the kernel's hsub: the same bits as ad + bc
    im = hlo.binary("add", hlo.binary("multiply", x, v), hlo.binary("multiply", y, u))
    return _complex(re, im, result_type)


def _div(a, b, result_type):
    x, y = _parts(a)  # a + bi
    c, d = _parts(b)  # c + di
    abs_c, abs_d = hlo.unary("abs", c), hlo.unary("abs", d)
    one = hlo.splat_like(1.0, c)
    # |c| >= |d| (false when either is NaN)
    wide = hlo.compare(abs_c, abs_d, "GE")
    # both of Smith's branches, each x * rat + y one fused multiply-add, picked per lane
    rat_c = hlo.binary("divide", d, c)
    scl_c = hlo.binary("divide", one, fused_multiply_add(d, rat_c, c))
    re_c = hlo.binary("multiply", fused_multiply_add(y, rat_c, x), scl_c)
    im_c = hlo.binary("multiply", fused_multiply_add(hlo.unary("negate", x), rat_c, y), scl_c)
    rat_d = hlo.binary("divide", c, d)
    scl_d = hlo.binary("divide", one, fused_multiply_add(c, rat_d, d))
    re_d = hlo.binary("multiply", fused_multiply_add(x, rat_d, y), scl_d)
    im_d = hlo.binary("multiply", fused_multiply_add(y, rat_d, hlo.unary("negate", x)), scl_d)
    re_, im_ = hlo.select(wide, re_c, re_d), hlo.select(wide, im_c, im_d)
    # by a zero: a / |c| and b / |d| (an infinity or NaN per part)
    zero = hlo.binary("and", hlo.compare(abs_c, hlo.splat_like(0.0, c), "EQ"),
                      hlo.compare(abs_d, hlo.splat_like(0.0, d), "EQ"))
    re = hlo.select(zero, hlo.binary("divide", x, abs_c), re_)
    im = hlo.select(zero, hlo.binary("divide", y, abs_d), im_)
    return _complex(re, im, result_type)


def _square(x):
    """``x * x`` as ``(rounded, error)`` with ``rounded + error`` exact
    (Veltkamp's split of ``x``; ``|x| < 2**995``)."""
    c = hlo.binary("multiply", x, hlo.splat_like(134217729.0, x))  # 2**27 + 1
    hi = hlo.binary("subtract", c, hlo.binary("subtract", c, x))
    lo = hlo.binary("subtract", x, hi)
    xx = hlo.binary("multiply", x, x)
    cross = hlo.binary("multiply", hlo.binary("multiply", hi, lo), hlo.splat_like(2.0, x))
    err = hlo.binary("add", hlo.binary("add", hlo.binary("subtract", hlo.binary("multiply", hi, hi), xx), cross),
                     hlo.binary("multiply", lo, lo))
    return xx, err


def _hypot_f64(x, y):
    """``sqrt(x*x + y*y)`` of float64 parts, correctly rounded but where the
    exact value lies within about 2**-100 (relative) of a halfway point; finite parts."""
    ax, ay = hlo.unary("abs", x), hlo.unary("abs", y)
    big, small = hlo.binary("maximum", ax, ay), hlo.binary("minimum", ax, ay)
    # scale by a power of two (exact) so that the squares neither overflow nor lose bits below
    # normal: with E big's biased exponent (1 for a subnormal, 2045 at most), big * 2**(1023 - E)
    # lies in [1, 4) and the root comes back times 2**(E - 1023)
    i64 = TensorType(hlo.type_of(big).shape, "i64")
    e = hlo.binary("shift_right_logical", hlo.value("bitcast_convert", [big], i64), hlo.constant(52, i64))
    e = hlo.binary("minimum", hlo.binary("maximum", e, hlo.constant(1, i64)), hlo.constant(2045, i64))
    shift = hlo.constant(52, i64)
    down_bits = hlo.binary("shift_left", hlo.binary("subtract", hlo.constant(2046, i64), e), shift)
    down = hlo.value("bitcast_convert", [down_bits], big.type)
    up = hlo.value("bitcast_convert", [hlo.binary("shift_left", e, shift)], big.type)
    half = hlo.splat_like(0.5, big)
    p = hlo.binary("multiply", big, down)
    q = hlo.binary("multiply", small, down)
    # p in [1, 4), q <= p: each square is pp + pe exactly (Dekker's product: the products
    # are plain multiplies that lazy-keep-roundings fences, so each rounds as written)
    pp, pe = _square(p)
    qq, qe = _square(q)
    s = hlo.binary("add", pp, qq)  # pp >= qq: s + t is pp + qq exactly (fast two-sum)
    t = hlo.binary("subtract", qq, hlo.binary("subtract", s, pp))
    low = hlo.binary("add", t, hlo.binary("add", pe, qe))
    r = hlo.unary("sqrt", s)
    # r + (s + low - r*r) / (2r), with s - r*r exact (r*r within an ulp of s: Sterbenz)
    rr, rr_err = _square(r)
    residual = hlo.binary("add", hlo.binary("subtract", hlo.binary("subtract", s, rr), rr_err), low)
    root = hlo.binary("add", r, hlo.binary("divide", hlo.binary("multiply", residual, half), r))
    out = hlo.binary("multiply", root, up)
    out = hlo.select(hlo.compare(small, hlo.splat_like(0.0, small), "EQ"), big, out)
    return out


def _abs(z, result_type):
    x, y = _parts(z)
    dtype = hlo.type_of(x).dtype
    if dtype == "f32":
        wx, wy = hlo.convert(x, "f64"), hlo.convert(y, "f64")
        squares = hlo.binary("add", hlo.binary("multiply", wx, wx), hlo.binary("multiply", wy, wy))  # exact products
        out = hlo.convert(hlo.unary("sqrt", squares), "f32")
    else:
        out = _hypot_f64(x, y)
    # Sleef: an infinite part gives +inf (a NaN in the other part too); a NaN, NaN
    inf = hlo.splat_like(_INF, x)
    either_inf = hlo.binary("or", hlo.compare(hlo.unary("abs", x), inf, "EQ"),
                            hlo.compare(hlo.unary("abs", y), inf, "EQ"))
    either_nan = hlo.binary("or", hlo.compare(x, x, "NE"), hlo.compare(y, y, "NE"))
    out = hlo.select(either_nan, hlo.splat_like(float("nan"), x), out)
    return hlo.select(either_inf, inf, out)


def _exp(z, builtin_out, result_type):
    x, y = _parts(z)
    dtype = hlo.type_of(x).dtype
    if dtype == "f32":
        wx, wy = hlo.convert(x, "f64"), hlo.convert(y, "f64")
        e, c, s = (hlo.convert(hlo.unary(n, v), "f32") for n, v in (("exponential", wx), ("cosine", wy), ("sine", wy)))
    else:
        e, c, s = hlo.unary("exponential", x), hlo.unary("cosine", y), hlo.unary("sine", y)
    re, im = hlo.binary("multiply", e, c), hlo.binary("multiply", e, s)
    mine = _complex(re, im, result_type)
    # finite x and y, y not zero, exp(x) a normal number: elsewhere the built-in lowering's special values
    limit = 87.0 if dtype == "f32" else 708.0
    regular = hlo.binary("and", hlo.compare(hlo.unary("abs", x), hlo.splat_like(limit, x), "LT"),
                         hlo.value("is_finite", [y], TensorType(hlo.type_of(y).shape, "i1")))
    regular = hlo.binary("and", regular, hlo.compare(y, hlo.splat_like(0.0, y), "NE"))
    return hlo.select(regular, mine, builtin_out)


def _from_integers(z) -> bool:
    """``z`` is a ``lazy.convert`` of integers or bools (``x * mask``): XLA rewrites a
    float product by a converted bool into a select, which drops eager's -0.0, and
    does not inside its own complex multiply, which keeps it there."""
    owner = z.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.operation.name != "lazy.convert":
        return False
    source = hlo.type_of(owner.operation.operands[0]).dtype
    return not is_float(source) and not is_complex(source)


def _wrap(name, builtin):
    def lowering(op, rewriter):
        operand_type = hlo.type_of(op.operands[0]).dtype
        if not is_complex(operand_type) or real_dtype(operand_type) not in ("f32", "f64"):
            return builtin(op, rewriter)
        if name == "mul":
            if any(_from_integers(v) for v in op.operands):
                return builtin(op, rewriter)
            return _mul(*op.operands, op.results[0].type)
        if name == "div":
            return _div(*op.operands, op.results[0].type)
        if name == "abs":
            return _abs(op.operands[0], op.results[0].type)
        return _exp(op.operands[0], builtin(op, rewriter), op.results[0].type)

    lowering.__lazycore_complex_exact__ = True
    return lowering


def install() -> None:
    for name in ("mul", "div", "abs", "exp"):
        full = f"lazy.{name}"
        entry = BUILTIN[full]
        if not getattr(entry.fn, "__lazycore_complex_exact__", False):
            BUILTIN[full] = Lowering(_wrap(name, entry.fn), full, entry.site, builtin=True)
