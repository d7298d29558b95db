"""Float to integer casts of NaN, infinities and values out of the target's
range, as NumPy's (C casts on x86: a narrow target keeps the low bits of the
int32 conversion, uint32/uint64 go through the signed instruction from
2**(n-1) up, and a uint32 cast's scalar tail after its 4-element vector loop
through int64), including float -> float -> int chains lazy-canonicalize may
shorten only where the answer stays."""

import warnings

import numpy
import pytest

import lazycore.numpy as np
from npcheck import same

SPECIAL = [numpy.nan, numpy.inf, -numpy.inf, 0.0, -0.0, 2.7, -2.7, 255.9, 256.0, -129.0, 300.7, -300.7,
           65535.5, 70000.5, -70000.5, 2.0**31, -(2.0**31), 3e9, -3e9, 2.0**32, 2.0**63, 1e19, -1e19, 2.0**64, 1e30]
TARGETS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def _values(src):
    rng = numpy.random.default_rng(0)
    spread = 10.0 ** rng.uniform(-1, 22, 200) * rng.choice([-1, 1], 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float16 overflows to inf
        return numpy.concatenate([SPECIAL, spread]).astype(src)


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
@pytest.mark.parametrize("dst", TARGETS)
def test_out_of_range_floats_cast_as_numpys(src, dst):
    x = _values(src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's invalid-value warning
        want = x.astype(dst)
    same(np.asarray(x).astype(dst), want)


@pytest.mark.parametrize("wide", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["uint32", "uint8"])
def test_a_cast_through_a_wider_float_is_not_shortened_where_it_differs(wide, dst):
    """float16 -> uint32 goes through int64 (NaN gives 0), float32 -> uint32
    through the unsigned route (NaN gives 2**31): the chain keeps its middle."""
    x = _values("float16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = x.astype(wide).astype(dst)
    same(np.asarray(x).astype(wide).astype(dst), want)
