"""Complex exp, log, sqrt, tanh (and NumPy's log1p) at infinities, NaN and
signed zeros give eager's answers (C99 Annex G: NumPy's and torch's, the
Array API's special cases), bit for bit, where XLA's formulas give NaN + NaN j."""

import warnings

import numpy as np
import pytest
import torch

import lazycore.numpy as lnp
import lazycore.torch as ltorch

INF, NAN = np.inf, np.nan
PARTS = [-INF, -2.5, -0.0, 0.0, 1.5, 1e30, INF, NAN]
VALUES = [complex(x, y) for x in PARTS for y in PARTS]


def _bits(a):
    a = np.asarray(a)
    parts = np.stack([a.real, a.imag])
    return np.where(np.isnan(parts), np.nan, parts)  # any NaN is NaN (its sign and payload are no answer)


def _same(got, want, special_only):
    got, want = _bits(got), _bits(want)
    if special_only:  # the finite lanes: XLA's formulas, to rounding
        finite = np.isfinite(want).all(axis=0) & np.isfinite(got).all(axis=0)
        np.testing.assert_allclose(got[:, finite], want[:, finite], rtol=2e-6)
        got, want = got[:, ~finite], want[:, ~finite]
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))  # signed zeros too


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", ["exp", "log", "log1p", "sqrt", "tanh"])
def test_numpy(name, dtype):
    a = np.array(VALUES, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, name)(a)
    got = np.array(getattr(lnp, name)(lnp.asarray(a)).tolist(), dtype)
    _same(got, want, special_only=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "log1p"])
def test_torch(name, dtype):
    t = torch.tensor(VALUES, dtype=dtype)
    want = getattr(torch, name)(t).numpy()
    got = getattr(torch, name)(t.to(ltorch.device())).cpu().numpy()
    _same(got, want, special_only=True)
