"""The Array API 2024.12 namespace of lazycore.numpy against NumPy's: shifts, DLPack,
to_device, the inspection namespace, default dtypes, signatures, named-tuple results.
(The standard's own conformance suite runs by hand: scripts/array_api_conformance.sh.)"""

import inspect

import numpy
import pytest
import torch

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import same

INTEGERS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _shift_operands(dtype):
    info = numpy.iinfo(dtype)
    if info.min < 0:
        x = [info.min, -5, -1, 0, 1, 7, info.max, 3, -3, 100, -100, 1]
        y = [0, 1, 2, info.bits - 1, info.bits, info.bits + 3, 3, -1, info.bits - 2, 5, 5, -7]
    else:
        x = [0, 1, 5, 7, info.max, 200, 3, 9, 1, 2, info.max, 1]
        y = [0, 1, 2, info.bits - 1, info.bits, info.bits + 3, 3, 1, info.bits - 2, 5, 1, 0]
    return numpy.array(x, dtype=dtype), numpy.array(y, dtype=dtype)


@pytest.mark.parametrize("dtype", INTEGERS)
def test_shifts_are_numpys_including_counts_out_of_range(dtype, clean_runtime):
    x, y = _shift_operands(dtype)
    for name in ("left_shift", "right_shift"):
        same(getattr(np, name)(np.asarray(x), np.asarray(y)), getattr(numpy, name)(x, y))
        same(getattr(numpy, name)(np.asarray(x), y), getattr(numpy, name)(x, y))  # NumPy's ufunc stays lazy
    same(np.bitwise_left_shift(np.asarray(x), np.asarray(y)), numpy.bitwise_left_shift(x, y))
    same(np.bitwise_right_shift(np.asarray(x), np.asarray(y)), numpy.bitwise_right_shift(x, y))
    assert metrics.fallbacks() == {}


def test_shift_operators_and_promotion(clean_runtime):
    a = numpy.arange(-4, 5, dtype=numpy.int32)
    la = np.asarray(a)
    same(la << 2, a << 2)
    same(la >> 1, a >> 1)
    same(3 << np.asarray(numpy.arange(5)), 3 << numpy.arange(5))
    same(np.asarray(numpy.arange(4, dtype=numpy.uint8)) << np.asarray(numpy.arange(4, dtype=numpy.int16)),
         numpy.arange(4, dtype=numpy.uint8) << numpy.arange(4, dtype=numpy.int16))
    b = a.copy()
    lb = np.asarray(b)
    lb <<= 3
    b <<= 3
    same(lb, b)
    lb >>= 2
    b >>= 2
    same(lb, b)
    with pytest.raises(TypeError):
        numpy.ones(2) << 1
    with pytest.raises(TypeError):
        np.ones(2) << 1


def test_dlpack_exports_the_value(clean_runtime):
    x = numpy.arange(6.0).reshape(2, 3)
    lx = np.asarray(x) * 2
    assert lx.__dlpack_device__() == (1, 0)  # the host copy it exports (kDLCPU)
    numpy.testing.assert_array_equal(numpy.from_dlpack(lx), x * 2)
    t = torch.from_dlpack(lx)
    assert t.dtype == torch.float64 and t.tolist() == (x * 2).tolist()
    with pytest.raises(BufferError):
        lx.__dlpack__(copy=False)


def test_from_dlpack(clean_runtime):
    x = numpy.arange(5, dtype=numpy.int32)
    got = np.from_dlpack(x)
    same(got, x)
    same(np.from_dlpack(torch.arange(3.0)), numpy.arange(3.0, dtype=numpy.float32))
    lx = np.asarray(x)
    assert np.from_dlpack(lx) is lx
    copied = np.from_dlpack(lx, copy=True)
    assert copied is not lx
    same(copied, x)
    assert np.from_dlpack(lx, device=lx.device) is lx
    with pytest.raises(BufferError):
        np.from_dlpack(x, copy=False)  # uploading is a copy
    with pytest.raises(ValueError):
        np.from_dlpack(x, device="not a device")


def test_to_device(clean_runtime):
    lx = np.asarray(numpy.arange(3))
    assert lx.to_device(lx.device) is lx
    assert lx.to_device(np.__array_namespace_info__().default_device()) is lx
    with pytest.raises(ValueError):
        lx.to_device("nowhere")
    with pytest.raises(ValueError):
        lx.to_device(lx.device, stream=1)
    # NumPy's to_device answers the same way
    assert numpy.arange(3).to_device("cpu") is not None
    with pytest.raises(ValueError):
        numpy.arange(3).to_device("nowhere")
    same(np.astype(lx, "float32", device=lx.device), numpy.arange(3).astype("float32"))
    with pytest.raises(ValueError):
        numpy.astype(numpy.arange(3), "float32", device="nowhere")
    with pytest.raises(ValueError):
        np.astype(lx, "float32", device="nowhere")


def test_version_and_namespace():
    assert np.__array_api_version__ == numpy.__array_api_version__ == "2024.12"
    x = np.asarray(numpy.ones(2))
    assert x.__array_namespace__(api_version="2024.12") is np
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="2099.12")


def test_inspection_namespace_answers_as_numpys():
    ours, theirs = np.__array_namespace_info__(), numpy.__array_namespace_info__()
    assert ours.capabilities() == theirs.capabilities()
    assert ours.default_dtypes() == theirs.default_dtypes()
    assert ours.default_dtypes(device=ours.default_device()) == theirs.default_dtypes()
    have = set(ours.dtypes())
    for kind in (None, "bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric", ("bool", "integral"), ("real floating", "complex floating")):
        want = {k: v for k, v in theirs.dtypes(kind=kind).items() if k in have}
        got = ours.dtypes(kind=kind)
        assert got == want and list(got) == list(want), kind
    assert {"bool", "int8", "uint64", "float32", "float64"} <= have
    for bad in ("foo", ("bool", "foo")):
        with pytest.raises(ValueError):
            theirs.dtypes(kind=bad)
        with pytest.raises(ValueError):
            ours.dtypes(kind=bad)
    with pytest.raises(ValueError):
        ours.dtypes(device="nowhere")


@pytest.mark.parametrize("make", ["zeros", "ones", "empty"])
def test_creation_dtype_none_is_the_default_float(make):
    got, want = getattr(np, make)((2, 3), dtype=None), getattr(numpy, make)((2, 3), dtype=None)
    assert got.dtype == want.dtype == numpy.float64
    assert getattr(np, make)(()).dtype == getattr(numpy, make)(()).dtype


@pytest.mark.parametrize("path", ["tril", "triu", "isdtype", "searchsorted", "count_nonzero", "meshgrid",
                                  "linalg.cholesky", "linalg.qr", "linalg.svd", "linalg.diagonal"])
def test_functions_run_by_numpy_have_numpys_signatures(path):
    ours, theirs = np, numpy
    for part in path.split("."):
        ours, theirs = getattr(ours, part), getattr(theirs, part)
    assert inspect.signature(ours) == inspect.signature(theirs)


def test_named_tuple_results_have_the_standards_fields(clean_runtime):
    x = numpy.array([3, 1, 2, 3, 1])
    got, want = np.unique_all(np.asarray(x)), numpy.unique_all(x)
    assert got._fields == want._fields == ("values", "indices", "inverse_indices", "counts")
    for g, w in zip(got, want):
        same(g, w)
    m = numpy.array([[2.0, 1.0], [1.0, 3.0]])
    for name, fields in (("eigh", ("eigenvalues", "eigenvectors")), ("slogdet", ("sign", "logabsdet")),
                         ("qr", ("Q", "R")), ("svd", ("U", "S", "Vh"))):
        assert getattr(np.linalg, name)(np.asarray(m))._fields == fields == getattr(numpy.linalg, name)(m)._fields


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "bool", "float32", "uint64"])
def test_vecdot_sums_in_the_operands_type(dtype, clean_runtime):
    rng = numpy.random.default_rng(0)
    a = rng.integers(0, 200, (4, 3)).astype(dtype)
    b = rng.integers(0, 200, (2, 1, 3)).astype(dtype)
    want = numpy.linalg.vecdot(a, b)
    same(np.linalg.vecdot(np.asarray(a), np.asarray(b)), want)
    same(np.vecdot(np.asarray(a), np.asarray(b)), numpy.vecdot(a, b))
    same(np.vecdot(np.asarray(a.T), np.asarray(a.T), axis=0), numpy.vecdot(a.T, a.T, axis=0))
    assert metrics.fallbacks() == {}


def test_fft_helpers_take_the_standards_arguments():
    f = np.fft.fftfreq(8, d=0.5, dtype=numpy.float32)
    assert f.dtype == numpy.float32
    numpy.testing.assert_array_equal(numpy.asarray(f), numpy.fft.fftfreq(8, 0.5).astype(numpy.float32))
    numpy.testing.assert_array_equal(numpy.asarray(np.fft.rfftfreq(9)), numpy.fft.rfftfreq(9))
    x = numpy.arange(10.0).reshape(2, 5)
    numpy.testing.assert_array_equal(numpy.asarray(np.fft.fftshift(np.asarray(x), axes=1)),
                                     numpy.fft.fftshift(x, axes=1))
    numpy.testing.assert_array_equal(numpy.asarray(np.fft.ifftshift(np.asarray(x))), numpy.fft.ifftshift(x))
    assert list(inspect.signature(np.fft.fftfreq).parameters) == ["n", "d", "dtype", "device"]


def test_fftn_takes_s_and_axes_as_lists():
    x = numpy.arange(24.0).reshape(2, 3, 4)
    got = np.fft.fftn(np.asarray(x), s=[3, 4], axes=[1, 2])
    numpy.testing.assert_allclose(numpy.asarray(got), numpy.fft.fftn(x, s=[3, 4], axes=[1, 2]), rtol=1e-12, atol=1e-12)


def test_reductions_keep_their_signatures():
    for name in ("max", "min", "argmax", "argmin"):
        assert "axis" in inspect.signature(getattr(np, name)).parameters, name


def test_vecdot_conjugates_complex_first_vectors():
    a = numpy.array([[1 + 2j, 3 - 1j], [0.5j, 2]])
    b = numpy.array([2 - 1j, 1 + 1j])
    for fn, lfn in ((numpy.vecdot, np.vecdot), (numpy.linalg.vecdot, np.linalg.vecdot)):
        numpy.testing.assert_allclose(numpy.asarray(lfn(np.asarray(a), np.asarray(b))), fn(a, b), rtol=1e-12)
