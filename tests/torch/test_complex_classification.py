"""``isinf``/``isfinite``/``abs`` of complex tensors on the lazy device are eager's
(issue 39): the shared classification took complex types for integers, so
``isinf`` was False and ``isfinite`` True for every complex element; ``abs`` of
NaN+inf j was NaN where eager's ``hypot`` gives inf."""

import pytest
import torch

import lazycore.torch as ltorch

_INF, _NAN = float("inf"), float("nan")
_Z = [complex(r, i) for r in (-_INF, _INF, 0.0, 3.0, _NAN) for i in (0.0, -_INF, _INF, 4.0, _NAN)]


@pytest.mark.parametrize("fn", [torch.isnan, torch.isinf, torch.isfinite, torch.abs], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_classification_is_eagers(fn, dtype):
    x = torch.tensor(_Z, dtype=dtype)
    want = fn(x)
    got = fn(x.to(ltorch.device())).cpu()
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())
