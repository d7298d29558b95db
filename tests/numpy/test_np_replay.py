"""Ufunc calls, view reads and view writes replayed per call signature (lazycore.recipes) give what tracing gives."""

import math
import warnings

import numpy
import pytest

import lazycore
import lazycore.numpy as lnp
from lazycore.trace import core
from lazycore.observe import metrics
from lazycore.ir.config import override
from lazycore.frontends.numpy import ufuncs
from lazycore.frontends.numpy.array import value

from npcheck import sample, same


def _digest(a):
    return value(a).value.node.digest


def _pairs(rng, shape, dtype):
    host = sample(rng, shape, dtype)
    return host, lnp.asarray(host)


def _check_all(pairs):
    """Compare many (lazy, NumPy) results after one barrier: one compile for all."""
    lazycore.mark_step()
    for got, want in pairs:
        same(got, want)


SCALARS = [0, 1, 2.5, 0.0, 1.0, -3, True, False, 2.5, 7, 0, -0.0, numpy.float32(2.5), numpy.int64(3)]


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_repeated_calls_take_each_scalar_value(rng, dtype):
    host, a = _pairs(rng, (5, 4), dtype)
    metrics.reset()
    results = []
    for _ in range(2):  # the second round replays every signature of the first
        for v in SCALARS:
            results.append((a * v, host * v))
            results.append((v - a if dtype != "bool" else v + a, v - host if dtype != "bool" else v + host))
            results.append((a < v, host < v))
            results.append((lnp.maximum(a, v), numpy.maximum(host, v)))
    _check_all(results)
    assert metrics.counters()["fallbacks"] == 0


def test_signed_zero_and_nan_scalars_are_their_own_signatures(rng):
    host, a = _pairs(rng, (6,), "float32")
    got = [a * 0.0, a * -0.0, a + math.nan, a * 0.0, a * -0.0, a + math.nan, a + float("nan")]
    want = [host * 0.0, host * -0.0, host + math.nan, host * 0.0, host * -0.0, host + math.nan, host + math.nan]
    _check_all(zip(got, want))
    for g, w in zip(got, want):
        numpy.testing.assert_array_equal(numpy.signbit(numpy.asarray(g)), numpy.signbit(w))


def test_out_of_range_ints_in_comparisons_keep_numpys_rule(rng):
    host, a = _pairs(rng, (7,), "int16")
    got, want = [], []
    for v in (40000, 3, 40000, -70000, 3):
        got += [a < v, a == v, a >= v]
        want += [host < v, host == v, host >= v]
    _check_all(zip(got, want))


def test_one_input_twice_and_two_inputs_of_one_signature(rng):
    ha, a = _pairs(rng, (3, 3), "float32")
    hb, b = _pairs(rng, (3, 3), "float32")
    pairs = []
    for _ in range(2):
        pairs += [(a * a, ha * ha), (a * b, ha * hb), (b * b, hb * hb), (b * a, hb * ha)]
        pairs += [(a - b, ha - hb), (a - a, ha - ha), (lnp.add(b, b), hb + hb), (+a, +ha), (lnp.positive(b), +hb)]
    _check_all(pairs)


@pytest.mark.parametrize("dtypes", [("int32", "float32"), ("uint8", "int8"), ("bool", "int64"), ("float32", "float64")])
def test_mixed_dtypes(rng, dtypes):
    ha, a = _pairs(rng, (4, 5), dtypes[0])
    hb, b = _pairs(rng, (5,), dtypes[1])
    pairs = []
    for _ in range(2):
        pairs += [(a + b, ha + hb), (b * a, hb * ha), (a > b, ha > hb), (a * 2, ha * 2), (a + 1.5, ha + 1.5),
                  (a * numpy.float32(2), ha * numpy.float32(2)), (lnp.sqrt(abs(a)), numpy.sqrt(abs(ha))),
                  (numpy.multiply(a, b), numpy.multiply(ha, hb))]
    _check_all(pairs)


def test_out_writes_back_every_call(rng):
    ha, a = _pairs(rng, (4, 3), "float32")
    hc, c = _pairs(rng, (4, 3), "float64")
    hv, v = _pairs(rng, (8, 3), "float32")
    for k in range(3):
        r = lnp.multiply(a, 2.5, out=c)
        numpy.multiply(ha, 2.5, out=hc)
        assert r is c
        lnp.add(a, a, out=v[::2])  # out= a strided view: written through to v
        numpy.add(ha, ha, out=hv[::2])
        a += 1.5
        ha += 1.5
        same(c, hc)
        same(v, hv)
        same(a, ha)


def test_errors_raise_on_every_call(rng):
    ha, a = _pairs(rng, (3, 4), "float32")
    hb, b = _pairs(rng, (4,), "float32")
    hi, i = _pairs(rng, (3, 4), "int32")
    _, bad = _pairs(rng, (3,), "float32")
    a + b  # recorded: the failing calls below share shapes or ufuncs with it
    lnp.add(a, b, out=a)
    for _ in range(3):
        with pytest.raises(ValueError):
            a + bad
        with pytest.raises(TypeError):  # float result into an int array, same_kind
            lnp.add(a, b, out=i)
        with pytest.raises(ValueError):  # result shape does not fit the output
            lnp.add(a, b, out=b)
        with pytest.raises(TypeError):  # the loop's input cast is not same_kind
            lnp.add(a, b, dtype=numpy.int32)
        with pytest.raises(TypeError):  # long double complex: no lazy element type
            a * numpy.clongdouble(1j)
        with pytest.raises(TypeError):
            lnp.add(a)
    with pytest.raises(TypeError):
        numpy.add(ha, hb, out=hi)
    with pytest.raises(TypeError):
        numpy.add(ha, hb, dtype=numpy.int32)


def test_host_arrays_are_read_at_every_call(rng):
    ha, a = _pairs(rng, (5,), "float32")
    pairs = []
    for k in range(3):
        host = numpy.arange(5, dtype=numpy.float32) * (k + 1)  # same signature, new values
        pairs += [(a + host, ha + host), (host * a, host * ha), (a + [k, 1, 2, 3, 4], ha + [k, 1, 2, 3, 4])]
    _check_all(pairs)


def test_views_as_inputs_and_writes_through_views(rng):
    hu = sample(rng, (9, 8), "float32")
    u = lnp.asarray(hu)
    hw = sample(rng, (8, 9), "float32")
    w = lnp.asarray(hw)
    for k in range(3):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        hlap = hu[:-2, 1:-1] + hu[2:, 1:-1] + hu[1:-1, :-2] + hu[1:-1, 2:] - 4 * hu[1:-1, 1:-1]
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * lap
        hu[1:-1, 1:-1] = hu[1:-1, 1:-1] + 0.1 * hlap
        u[::3, ::-2] = u[::3, ::-2] * 0.5 + k  # strided and reversed steps
        hu[::3, ::-2] = hu[::3, ::-2] * 0.5 + k
        w.T[1:, 2:5] = u[1:, 2:5].T.T * 2  # a write through a transpose
        hw.T[1:, 2:5] = hu[1:, 2:5].T.T * 2
        b = lnp.broadcast_to(u[0], (4, 8)) + u[:4]  # a read-only broadcast view
        hbb = numpy.broadcast_to(hu[0], (4, 8)) + hu[:4]
        r = w.reshape(6, 12)  # reshape, permute and slice steps
        hr = hw.reshape(6, 12)
        t = r[::2].T - 1
        ht = hr[::2].T - 1
        r.T[2:4, 1:4] = t[2:4] * 3
        hr.T[2:4, 1:4] = ht[2:4] * 3
        lazycore.mark_step()
        same(u, hu)
        same(w, hw)
        same(b, hbb)
        same(lap, hlap)
        same(t, ht)


def _heat_step(np, u, alpha=0.2):
    inner = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * inner
    u[1:-1, 1:-1] = inner + alpha * lap
    return u


def test_a_replayed_step_hashes_as_a_traced_one_without_lowering_anything(rng, monkeypatch):
    host = sample(rng, (12, 10), "float32")
    start = lnp.asarray(host)
    lazycore.mark_step()
    with override(replay=False):
        traced = _digest(_heat_step(lnp, start.copy()))
    with override(replay=True):
        recorded = _digest(_heat_step(lnp, start.copy()))

    calls = []

    def counting(real):
        def apply(*args, **kwargs):
            calls.append(args[0])
            return real(*args, **kwargs)
        return apply

    monkeypatch.setattr(core, "apply", counting(core.apply))
    monkeypatch.setattr(ufuncs, "apply", counting(ufuncs.apply))
    with override(replay=True):  # also under LAZYCORE_REPLAY=0
        u = _heat_step(lnp, start.copy())
    assert calls == []  # every read, ufunc and write replayed
    assert _digest(u) == traced == recorded
    with override(replay=False):
        v = _heat_step(lnp, start.copy())
    assert calls  # tracing runs the lowerings
    assert _digest(v) == traced
    same(u, _heat_step(numpy, host.copy()))
    same(v, _heat_step(numpy, host.copy()))


def test_replay_off_traces_every_call(rng):
    host, a = _pairs(rng, (4,), "float32")
    with override(replay=False):
        pairs = [(a * 2.5 + 1, host * 2.5 + 1), (lnp.tanh(a[::2]), numpy.tanh(host[::2]))]
        pairs += [(a * 2.5 + 1, host * 2.5 + 1)]
    _check_all(pairs)


def test_view_steps_with_side_effects_run_every_call(rng):
    ha, a = _pairs(rng, (3, 1), "float32")
    hb, b = _pairs(rng, (1, 4), "float32")
    x, _ = lnp.broadcast_arrays(a, b)
    hx, _ = numpy.broadcast_arrays(ha, hb)
    for k in range(2):  # the frontend warns at every write through a broadcast_arrays result
        with pytest.warns(FutureWarning):
            x[...] = 2.5 + k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hx[...] = 2.5 + k
        same(x, hx)
        same(a, ha)


def _decay_step(np_, u, dt):
    return u + dt * (np_.roll(u, 1) - u) * 0.5


def test_a_float_that_changes_every_step_replays_one_recording(rng, monkeypatch):
    """A time step (or any Python float) new at every call: the ufunc recordings
    made the float a scalar parameter only, so they serve every value."""
    host = sample(rng, (6, 7), "float32")
    u, want = lnp.asarray(host), host.copy()
    lazycore.mark_step()
    metrics.reset()
    calls = []
    real = ufuncs.recipes.record_call

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ufuncs.recipes, "record_call", counting)
    dt = 0.3
    for step in range(6):
        dt *= 0.93
        u = u + dt * (u - 0.25)
        want = want + numpy.float32(dt) * (want - numpy.float32(0.25))
        lazycore.mark_step()
        if step == 0:
            first = len(calls)
    assert first > 0 and len(calls) == first
    assert metrics.counters()["compiles"] == 1
    numpy.testing.assert_allclose(numpy.asarray(u), want, rtol=2e-6)


def test_whole_and_negative_floats_are_their_own_recordings(rng):
    host, a = _pairs(rng, (5,), "float32")
    pairs = []
    for v in (0.3, 0.6, 2.0, 0.0, -0.3, -1.7, 1.0, 1e-4, 3.25):
        pairs += [(a * v, host * v), (v - a, v - host), (a / v if v else a, host / v if v else host)]
    _check_all(pairs)
