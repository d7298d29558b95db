"""NumPy's own Python code run on lazy arrays (issue 39/43, frontends/numpy/pycode.py).

The NumPy functions written in Python over other NumPy functions (gradient,
trapezoid, kron, ediff1d, insert, block, logspace, geomspace, pad's statistic
modes, ...) were counted fallbacks: NumPy on the host after a download. They
now run NumPy's code itself with lazy arrays, so each inner call stays lazy,
and give NumPy's answer: dtype, shape and bits. Where that code needs a value
(a data-dependent shape, ``if x.any():``, ``int(x.min())``), or would write
into an argument, the run stops before it and the call is the counted
fallback, as before, with nothing half done.
"""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.frontends.numpy import pycode
from lazycore.observe import metrics

_R = numpy.random.default_rng(0)
F1 = _R.standard_normal(12)
F2 = _R.standard_normal((4, 5))
I1 = _R.integers(0, 10, 12)
C1 = F1 + 1j * _R.standard_normal(12)
X1 = numpy.cumsum(numpy.abs(_R.standard_normal(12)))

# each: numpy's function called on arrays made by L (np.asarray: lazy; numpy.asarray: NumPy's answer)
_ON_ARRAYS = {
    "gradient": lambda L: numpy.gradient(L(F2), 2.0, axis=1),
    "gradient_edge_order_2": lambda L: numpy.gradient(L(F2), edge_order=2),
    "trapezoid": lambda L: numpy.trapezoid(L(F2), axis=0),
    "trapezoid_dx": lambda L: numpy.trapezoid(L(F2), dx=0.5),
    "kron": lambda L: numpy.kron(L(F2[:2, :3]), L(F2[2:, 3:])),
    "kron_int": lambda L: numpy.kron(L(I1[:4].reshape(2, 2)), L(I1[4:10])),
    "isin_float": lambda L: numpy.isin(L(F1), L(F1[::3])),
    "ediff1d": lambda L: numpy.ediff1d(L(F2), to_begin=[1.0], to_end=[2.0, 3.0]),
    "diagflat": lambda L: numpy.diagflat(L(F1[:4]), k=1),
    "delete_slice": lambda L: numpy.delete(L(F2), slice(1, 3), axis=0),
    "delete_list": lambda L: numpy.delete(L(F2), [0, 2], axis=1),  # a host mask: the second mode
    "insert": lambda L: numpy.insert(L(F2), 1, 5.0, axis=1),
    "block": lambda L: numpy.block([[L(F2), L(F2[:, :2])], [L(F2[:1]), L(F2[:1, :2])]]),
    "fix": lambda L: numpy.fix(L(F1 * 3)),
    "iscomplex": lambda L: numpy.iscomplex(L(C1)),
    "isreal": lambda L: numpy.isreal(L(C1)),
    "polyadd": lambda L: numpy.polyadd(L(F1[:4]), L(F1[:6])),
    "polysub": lambda L: numpy.polysub(L(F1[:4]), L(F1[:6])),
    "polyder": lambda L: numpy.polyder(L(F1[:6]), 2),
    "polyint": lambda L: numpy.polyint(L(F1[:6]), 2, k=[1.0, 2.0]),
    "resize": lambda L: numpy.resize(L(F2), (3, 7)),
    "sinc": lambda L: numpy.sinc(L(F1)),
    "unwrap": lambda L: numpy.unwrap(L(F1 * 4)),
    "histogram_bin_edges": lambda L: numpy.histogram_bin_edges(L(F1), bins=4, range=(-2, 2)),
    "pad_maximum": lambda L: numpy.pad(L(F2), 2, mode="maximum"),
    "pad_minimum": lambda L: numpy.pad(L(F2), ((1, 2), (0, 3)), mode="minimum", stat_length=2),
    "pad_mean": lambda L: numpy.pad(L(F2), 2, mode="mean"),
    "pad_median": lambda L: numpy.pad(L(F2), 1, mode="median"),
}

# each: lazycore.numpy's function, or NumPy's, from numbers (m: the module)
_FROM_NUMBERS = {
    "logspace": lambda m: m.logspace(0, 2, 7),
    "logspace_base": lambda m: m.logspace(0, 2, 7, base=2.0, endpoint=False, dtype=numpy.float32),
    "geomspace": lambda m: m.geomspace(1, 1000, 7),
    "geomspace_negative": lambda m: m.geomspace(-1, -1000, 5),
    "geomspace_complex": lambda m: m.geomspace(1j, 16j, 5),
    "gradient": lambda m: m.gradient([1.0, 4.0, 9.0, 16.0]),
}


def _bitwise(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _bitwise(g, w)
        return
    assert isinstance(got, np.ndarray), type(got)
    host, want = numpy.asarray(got), numpy.asarray(want)
    assert (host.dtype, host.shape) == (want.dtype, want.shape)
    assert host.tobytes() == want.tobytes(), (host, want)


@pytest.mark.parametrize("name", list(_ON_ARRAYS))
def test_numpy_code_on_lazy_arrays_stays_lazy_with_numpys_bits(name, clean_runtime):
    got = _ON_ARRAYS[name](np.asarray)
    assert metrics.fallbacks() == {}
    _bitwise(got, _ON_ARRAYS[name](numpy.asarray))


@pytest.mark.parametrize("name", list(_FROM_NUMBERS))
def test_lazycore_numpy_functions_in_python_are_not_fallbacks(name, clean_runtime):
    got = _FROM_NUMBERS[name](np)
    assert metrics.fallbacks() == {}
    _bitwise(got, _FROM_NUMBERS[name](numpy))


def test_a_sum_inside_numpys_code_is_lazycores_sum(clean_runtime):
    # trapezoid with x sums 11 float64 terms: lazycore's float sums are not NumPy's pairwise
    # order (as np.sum of a lazy array): within rounding, not bit for bit
    got = numpy.trapezoid(np.asarray(F1), np.asarray(X1))
    assert metrics.fallbacks() == {}
    numpy.testing.assert_allclose(numpy.asarray(got), numpy.trapezoid(F1, X1), rtol=1e-14)


@pytest.mark.parametrize("call", [
    lambda L: numpy.isin(L(I1), L(I1[:3])),  # int(ar2.min()) chooses the table kind
    lambda L: numpy.gradient(L(F1), L(X1)),  # ``if uniform_spacing:``
    lambda L: numpy.trim_zeros(L(numpy.r_[0.0, F1, 0.0])),  # a data-dependent shape
    lambda L: numpy.union1d(L(I1), L(I1 + 3)),
])
def test_code_that_needs_a_value_is_one_counted_fallback(call, clean_runtime):
    x = F1.copy()
    a = np.asarray(x)
    got = call(np.asarray)
    assert sum(sum(v.values()) for v in metrics.fallbacks().values()) == 1
    _bitwise(got, call(numpy.asarray))
    assert numpy.asarray(a).tobytes() == x.tobytes()


def test_a_stopped_run_leaves_its_arguments_as_they_were(clean_runtime):
    # np.fix writes into out= (an argument): the run stops before the write, the fallback
    # writes it once; np.put writes into its array: the same
    x = F1 * 3
    out = np.asarray(numpy.zeros(12))
    got = numpy.fix(np.asarray(x), out=out)
    assert got is out
    _bitwise(out, numpy.fix(x))
    a, h = np.asarray(F1.copy()), F1.copy()
    numpy.put(a, [0, 2], [9.0, 8.0])
    numpy.put(h, [0, 2], [9.0, 8.0])
    _bitwise(a, h)
    assert set(metrics.fallbacks()) == {"numpy.fix", "numpy.put"}


@pytest.mark.parametrize("call, error", [
    (lambda L: numpy.gradient(L(F1[:1])), ValueError),
    (lambda L: numpy.ediff1d(L(I1), to_begin=[1.5]), TypeError),
    (lambda L: numpy.trapezoid(L(F1), L(X1[:5])), ValueError),
    (lambda L: numpy.insert(L(F1), 20, 1.0), IndexError),
    (lambda L: numpy.delete(L(F2), 7, axis=0), IndexError),
    (lambda L: numpy.delete(L(F1), L(numpy.array([], float))), IndexError),  # a float index array
    (lambda L: numpy.pad(L(F2), 2, mode="mean", stat_length=-1), ValueError),
])
def test_bad_input_raises_numpys_exception(call, error, clean_runtime):
    with pytest.raises(error):
        call(numpy.asarray)
    with pytest.raises(error):
        call(np.asarray)


def test_logspace_bad_input_raises_numpys_exception(clean_runtime):
    for m in (numpy, np):
        with pytest.raises(ValueError):
            m.logspace(0, 1, -1)


def test_the_rule_covers_numpys_python_functions_but_not_files_or_callbacks():
    assert pycode.covered(numpy.gradient) and pycode.covered(numpy.logspace) and pycode.covered(numpy.kron)
    assert not pycode.covered(numpy.savetxt)  # a stopped run must not have written a file
    assert not pycode.covered(numpy.piecewise)  # nor called the user's functions once more
    assert not pycode.covered(numpy.concatenate)  # C: no NumPy code to run


def test_a_ufunc_takes_a_dtype_class_as_numpy_does(clean_runtime):
    # np.linspace's ``np.subtract(stop, start, dtype=type(dt))``
    a = np.asarray(F1)
    got = numpy.subtract(a, a * 2, dtype=type(numpy.dtype(numpy.float32)))
    assert metrics.fallbacks() == {}
    _bitwise(got, numpy.subtract(F1, F1 * 2, dtype=type(numpy.dtype(numpy.float32))))
