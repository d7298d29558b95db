"""LAZYCORE_DEBUG's recompile reason compares attributes as the digest does:
a NaN constant in both graphs (np.nanmax's) is no difference between them, so
the reason names the change that made the new program (issue 42: one reading
of attributes; it named 'dense<nan> vs dense<nan>' before)."""

import numpy as np
import pytest

import lazycore.numpy as lnp
from lazycore.ir.config import override
from lazycore.observe import debug

pytestmark = pytest.mark.usefixtures("clean_runtime")


def test_a_nan_constant_is_not_the_recompile_reason(capsys):
    debug.reset()
    capsys.readouterr()
    with override(debug=1):
        for i in range(3):
            a = lnp.asarray(np.full((4, 4), 2.0, np.float32))
            m = lnp.nanmax(a, axis=0)  # a NaN constant in every graph
            y = m * 2.5 if i < 2 else m + 2.5
            assert float(y.sum()) == (20.0 if i < 2 else 18.0)
    reasons = [ln for ln in capsys.readouterr().err.splitlines() if ": recompile: " in ln]
    debug.reset()
    assert len(reasons) == 1, reasons
    assert "op lazy.add vs lazy.mul" in reasons[0] and "dense<nan>" not in reasons[0], reasons[0]


def test_attribute_keys_read_floats_by_their_repr():
    key = debug._attr_key
    assert key(float("nan")) == key(float("nan")) and key(0.0) != key(-0.0) and key(0.5) == key(0.5)
    assert key(np.array([1.0, np.nan])) == key(np.array([1.0, np.nan]))
    assert key(np.array([0.0])) != key(np.array([-0.0]))
    assert key(np.array([1, 2])) != key(np.array([1, 3])) and key((1, 2)) == (1, 2)
    assert debug._show_attr(key(np.array([1.5, np.nan]))) == "dense<1.5, nan> (<f8, shape (2,))"
    assert debug._show_attr(key(0.25)) == "0.25"
