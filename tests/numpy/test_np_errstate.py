"""NumPy's floating-point warnings and FloatingPointError under np.errstate,
from lazy ufuncs: the same category, message, order and count per call as
NumPy on the same inputs, emitted at the barrier and attributed to the
user's line; nothing under NumPy's untouched startup state (lazycore's one
deviation: the checks cost a pass over each result, see frontends/numpy/fpe.py)."""

import sys
import warnings

import numpy as np
import pytest

import lazycore
import lazycore.numpy as lnp

CASES = [
    ("divide", lambda m: m.asarray([1.0, 0.0, 2.0]) / 0.0),
    ("divide float32 overflow", lambda m: m.asarray([3e38], dtype=np.float32) / np.float32(0.5)),
    ("floor_divide", lambda m: m.floor_divide(m.asarray([1.0, 0.0]), 0.0)),
    ("integer floor_divide", lambda m: m.asarray([1, 2]) // 0),
    ("integer remainder", lambda m: m.asarray([1, 2]) % 0),
    ("remainder", lambda m: m.remainder(m.asarray([1.0]), 0.0)),
    ("log", lambda m: m.log(m.asarray([0.0, -1.0, 1.0]))),
    ("log1p", lambda m: m.log1p(m.asarray([-1.0]))),
    ("arctanh", lambda m: m.arctanh(m.asarray([1.0, 0.5]))),
    ("reciprocal", lambda m: m.reciprocal(m.asarray([0.0, 2.0]))),
    ("power", lambda m: m.power(m.asarray([0.0, -8.0]), m.asarray([-1.0, 1 / 3]))),
    ("multiply overflow", lambda m: m.asarray([1e308, 1.0]) * 10.0),
    ("exp overflow", lambda m: m.exp(m.asarray([1000.0, 0.0]))),
    ("sqrt", lambda m: m.sqrt(m.asarray([-1.0, 4.0]))),
    ("inf - inf", lambda m: m.asarray([np.inf]) - m.asarray([np.inf])),
    ("sin of inf", lambda m: m.sin(m.asarray([np.inf, 0.0]))),
    ("nan in, nan out: nothing", lambda m: m.asarray([np.nan, 1.0]) + 1.0),
    ("inf in, inf out: nothing", lambda m: m.exp(m.asarray([np.inf]))),
    ("nothing", lambda m: m.sqrt(m.asarray([1.0, 4.0])) * 3.0),
]


def _run(fn, mod):
    """fn(mod)'s values and warnings, all under errstate warn (each warning recorded)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with np.errstate(all="warn"):
            out = fn(mod)
        values = np.asarray(out.tolist() if mod is lnp else out)  # the lazy read runs the barrier here
    return values, [(w.category, str(w.message)) for w in seen]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_warnings_are_numpys(name, fn):
    want_values, want = _run(fn, np)
    got_values, got = _run(fn, lnp)
    # which values are inf or nan exactly; finite ones to the last bit but one: XLA's
    # transcendental functions are not correctly rounded, and the CPU decides the
    # last bit (arctanh(0.5) is NumPy's on one machine and 1 ulp above on another)
    np.testing.assert_array_equal(np.isfinite(got_values), np.isfinite(want_values))
    finite = np.isfinite(want_values)
    np.testing.assert_array_equal(got_values[~finite], want_values[~finite])
    np.testing.assert_array_max_ulp(got_values[finite], want_values[finite], maxulp=1)
    assert got == want


def test_a_warning_names_the_users_line():
    a = lnp.asarray([1.0, 0.0])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with np.errstate(divide="warn", invalid="ignore"):
            b = a / 0.0; line = sys._getframe().f_lineno  # noqa: E702
        b.tolist()
    assert [(w.filename, w.lineno, str(w.message)) for w in seen] == [
        (__file__, line, "divide by zero encountered in divide")]


def test_the_default_action_warns_once_per_line_as_numpy_does():
    counts = []
    for mod in (np, lnp):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            with np.errstate(divide="warn"):
                for _ in range(3):
                    r = mod.asarray([1.0]) / 0.0
                    r.tolist()
        counts.append(len(seen))
    assert counts == [1, 1]


def test_raise_fails_the_result_and_nothing_else():
    a = lnp.asarray([1.0, 0.0])
    with np.errstate(divide="raise", invalid="ignore"):
        bad = a / 0.0
        good = a + 1.0
    with pytest.raises(FloatingPointError, match="divide by zero encountered in divide"):
        bad.tolist()
    assert good.tolist() == [2.0, 1.0]
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            np.asarray([1.0]) / 0.0  # NumPy's own, for the type and message


def test_each_category_follows_its_own_mode():
    a = lnp.asarray([1.0, 0.0])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with np.errstate(divide="ignore", invalid="warn"):
            (a / 0.0).tolist()
    assert [str(w.message) for w in seen] == ["invalid value encountered in divide"]


def test_a_recorded_loop_replays_under_its_own_modes():
    """The modes are part of the call's signature: a loop recorded while
    warning does not warn (or skip warning) under other modes."""
    a = lnp.asarray([1.0])
    got = []
    for mode in ("warn", "ignore", "warn", "ignore"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with np.errstate(divide=mode):
                (a / 0.0).tolist()
        got.append(len(seen))
    assert got == [1, 0, 1, 0]


def test_numpys_startup_state_checks_nothing():
    """lazycore's deviation: NumPy's default "warn" is honoured once the
    program sets any errstate (np.seterr(all="warn") restores NumPy's behaviour)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = (lnp.asarray([1.0]) / 0.0).tolist()
    assert r == [np.inf] and seen == []
    with lazycore.testing.capture() as cap:
        (lnp.asarray([2.0]) / 3.0).tolist()
    assert "lazy.check" not in cap.text("lazy")
