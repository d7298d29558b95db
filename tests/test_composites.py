"""The core's composites (lazycore.trace.composites) against NumPy, through the core API.

Every float element type, random values over each function's domain and the
edges: signed zeros, +-1, the infinities, NaN, the largest and smallest normal
numbers, and the points where a formula switches branch or an intermediate
overflows. Results must be NumPy's within a few units in the last place, with
NaN, infinities and the sign of zero exactly NumPy's. (Half types: NumPy's
``e`` loops and ml_dtypes' bfloat16 loops compute in float32 and round once,
as the composites do; one ulp covers the double rounding.)

XLA runs with subnormals flushed to zero, so subnormal inputs are not used
and results NumPy gives as subnormals are not compared.
"""

import functools
import math

import ml_dtypes
import numpy
import pytest
import torch

import lazycore as lc
from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir.graph import Scalar
from lazycore.trace import composites

FLOATS = [numpy.float16, ml_dtypes.bfloat16, numpy.float32, numpy.float64]
ULPS = {"float16": 1, "bfloat16": 1, "float32": 4, "float64": 4}


def _finfo(dt):
    return ml_dtypes.finfo(dt)


def _edges(dt):
    fi = _finfo(dt)
    big, tiny = float(fi.max), float(fi.tiny)
    ln_max = math.log(big)
    return [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, math.inf, -math.inf, math.nan, big, -big, tiny, -tiny,
            1 - float(fi.eps), -1 + float(fi.eps), 1 + float(fi.eps),
            ln_max - 0.5, ln_max + 0.3, -(ln_max + 0.3),  # sinh/cosh: e^x overflows, the result does not
            math.sqrt(big) * 2, 1e18, 1e150]  # asinh/acosh: x^2 overflows


def _inputs(rng, dt, domain):
    lo, hi = domain
    parts = [rng.uniform(lo, hi, 400)]
    parts += [rng.standard_normal(300) * s for s in (0.5, 4, 60)]
    parts.append(rng.uniform(0.9, 1.1, 100) * rng.choice([-1, 1], 100))
    parts.append(numpy.exp(rng.uniform(-40, 40, 200)) * rng.choice([-1, 1], 200))
    x = numpy.concatenate(parts + [numpy.asarray(_edges(dt))])
    with numpy.errstate(all="ignore"):
        x = x.astype(dt)
    fi = _finfo(dt)
    x = x[~((x != 0) & (numpy.abs(x.astype(numpy.float64)) < float(fi.tiny)))]  # no subnormals
    return x


def _ulps(got, want, dt):
    """|got - want| in units in the last place of want (0 where both are NaN or equal)."""
    fi = _finfo(dt)
    g, w = got.astype(numpy.float64), want.astype(numpy.float64)
    exact = (g == w) | (numpy.isnan(g) & numpy.isnan(w))
    with numpy.errstate(all="ignore"):
        mag = numpy.maximum(numpy.abs(w), float(fi.tiny))
        ulp = numpy.exp2(numpy.floor(numpy.log2(mag))) * float(fi.eps)
        err = numpy.abs(g - w) / ulp
    return numpy.where(exact, 0.0, numpy.where(numpy.isnan(err), numpy.inf, err))


def check(got, want, dt, inputs, signed_zeros=True):
    got, want = numpy.asarray(got), numpy.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    fi = _finfo(dt)
    w64 = want.astype(numpy.float64)
    compared = ~((w64 != 0) & (numpy.abs(w64) < float(fi.tiny)))  # NumPy's subnormal results: flushed here
    err = numpy.where(compared, _ulps(got, want, dt), 0.0)
    worst = int(numpy.argmax(err))
    assert err[worst] <= ULPS[numpy.dtype(dt).name], (
        f"{err[worst]} ulps at {tuple(a[worst] for a in inputs)}: got {got[worst]!r}, NumPy {want[worst]!r}")
    nan = numpy.isnan(w64)
    assert numpy.array_equal(numpy.isnan(got.astype(numpy.float64)), nan)
    zero = compared & (w64 == 0) & signed_zeros
    assert numpy.array_equal(numpy.signbit(got.astype(numpy.float64))[zero], numpy.signbit(w64)[zero]), "sign of zero"


def run(fn, *hosts):
    return lc.to_numpy(fn(*(lc.from_numpy(h) for h in hosts)))


UNARY = {
    "tan": (numpy.tan, (-10, 10)),
    "exp2": (numpy.exp2, (-200, 200)),
    "log2": (numpy.log2, (0, 100)),
    "log10": (numpy.log10, (0, 100)),
    "atan": (numpy.arctan, (-50, 50)),
    "asin": (numpy.arcsin, (-1, 1)),
    "acos": (numpy.arccos, (-1, 1)),
    "sinh": (numpy.sinh, (-100, 100)),
    "cosh": (numpy.cosh, (-100, 100)),
    "asinh": (numpy.arcsinh, (-1e6, 1e6)),
    "acosh": (numpy.arccosh, (1, 1e6)),
    "atanh": (numpy.arctanh, (-1, 1)),
    "reciprocal": (numpy.reciprocal, (-10, 10)),
    "trunc": (numpy.trunc, (-100, 100)),
}


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: numpy.dtype(d).name)
@pytest.mark.parametrize("name", UNARY)
def test_unary_composite_is_numpys(rng, name, dt):
    ref, domain = UNARY[name]
    x = _inputs(rng, dt, domain)
    with numpy.errstate(all="ignore"):
        want = ref(x)
    check(run(getattr(composites, name), x), want, dt, (x,))


BINARY = {
    "hypot": numpy.hypot,
    "floor_divide": numpy.floor_divide,
    "remainder": numpy.remainder,
    "fmax": numpy.fmax,
    "fmin": numpy.fmin,
}
NUMPYS = {"remainder": functools.partial(composites.remainder, zero_sign="divisor")}


def _pairs(rng, dt):
    edges = numpy.asarray(_edges(dt))
    with numpy.errstate(all="ignore"):
        a = numpy.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-3, 4, 500), numpy.repeat(edges, len(edges))])
        b = numpy.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-3, 4, 500), numpy.tile(edges, len(edges))])
        return a.astype(dt), b.astype(dt)


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: numpy.dtype(d).name)
@pytest.mark.parametrize("name", BINARY)
def test_binary_composite_is_numpys(rng, name, dt):
    a, b = _pairs(rng, dt)
    with numpy.errstate(all="ignore"):
        want = BINARY[name](a, b)
    # IEEE leaves the sign of max(+0, -0) open, and NumPy's own loops differ by dtype
    check(run(NUMPYS.get(name) or getattr(composites, name), a, b), want, dt, (a, b),
          signed_zeros=name not in ("fmax", "fmin"))


TORCH = {numpy.float16: torch.float16, ml_dtypes.bfloat16: torch.bfloat16, numpy.float32: torch.float32,
         numpy.float64: torch.float64}


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: numpy.dtype(d).name)
def test_remainder_is_torchs_by_default(rng, dt):
    """torch's remainder is fmod's moved by b: a zero keeps the dividend's sign (NumPy's takes b's)."""
    a, b = _pairs(rng, dt)
    # eager's vectorized loop computes a - b floor(a / b), NaN where that quotient overflows
    # (its scalar loop, and lazycore, give fmod's exact answer): quotients it gets right only
    with numpy.errstate(all="ignore"):
        q = numpy.abs(a.astype(numpy.float64) / b.astype(numpy.float64))
    a, b = a[q < 1e6], b[q < 1e6]
    ta, tb = (torch.from_numpy(v.astype(numpy.float64)).to(TORCH[dt]) for v in (a, b))
    want = torch.remainder(ta, tb).double().numpy().astype(dt)
    check(run(composites.remainder, a, b), want, dt, (a, b))


@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "uint8", "uint32"])
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmax", "fmin"])
def test_integer_division_and_selection_are_numpys(rng, name, dt):
    info = numpy.iinfo(dt)
    a = rng.integers(max(info.min, -1000), min(info.max, 1000), 300).astype(dt)
    b = rng.integers(max(info.min, -9), min(info.max, 9), 300).astype(dt)
    b[b == 0] = 3  # NumPy's integer division by zero is a warning and a 0, not a value to match
    numpy.testing.assert_array_equal(run(NUMPYS.get(name) or getattr(composites, name), a, b), BINARY[name](a, b))


@pytest.mark.parametrize("dt", FLOATS + [numpy.int32, numpy.uint8, numpy.bool_], ids=lambda d: numpy.dtype(d).name)
@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_classification_is_numpys(rng, name, dt):
    with numpy.errstate(all="ignore"):
        x = numpy.concatenate([rng.standard_normal(50) * 100, _edges(numpy.float32)]).astype(dt)
    got = run(getattr(composites, name), x)
    assert got.dtype == numpy.bool_
    numpy.testing.assert_array_equal(got, getattr(numpy, name)(x))


def _leaves(node):
    seen, stack, out = set(), [node], []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        operands = [v for o in n.operands for v in (o if isinstance(o, tuple) and not hasattr(o, "node") else (o,))]
        if not operands:
            out.append(n)
        stack.extend(v.node for v in operands)
    return out


@pytest.mark.parametrize("dt", ["f16", "bf16", "f32", "f64", "i32", "i1"])
def test_full_like_bakes_a_constant_like_the_operand(dt):
    npdt = to_numpy_dtype(dt)
    x = lc.from_numpy(numpy.zeros((2, 3), npdt))
    value = True if dt == "i1" else 7
    c = composites.full_like(x, value)
    assert (c.shape, c.dtype, c.device) == (x.shape, x.dtype, x.device)
    # baked into the program (a lazy.constant), not a scalar parameter: part of the formula
    (leaf,) = _leaves(c._value.node)
    assert leaf.op == "constant" and type(leaf) is not Scalar
    numpy.testing.assert_array_equal(lc.to_numpy(c), numpy.full((2, 3), value, npdt))
