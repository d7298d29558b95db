"""PyTorch's OpInfo database on the lazy device against eager CPU.

The sweep (:mod:`lazycore.frontends.torch.opinfo`) runs once per module, GROUP
OpInfos per program (an OpInfo that fails in its group runs again alone, and
that run is its result), for the OpInfos selected; each test reads its OpInfo's
result. A wrong value is never acceptable; an error is acceptable only for
the known limitations listed in KNOWN_ERRORS, each with its reason.
"""

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal imports it

import torch  # noqa: E402

from lazycore.frontends.torch import opinfo  # noqa: E402
from _bits import BY_HAND  # noqa: E402  (tests/ is on the path)

MIN_PASS_NO_FALLBACK = 150
GROUP = 6  # OpInfos per program: fewer lowerings, MLIR contexts and XLA compiles than one each

# OpInfo name -> why the lazy run raises. Only errors are excused here, never wrong values.
KNOWN_ERRORS = {}

# complex64 OpInfo name -> why the lazy run raises.
KNOWN_ERRORS_COMPLEX64 = {}

# int64 OpInfo name -> why the lazy run raises.
KNOWN_ERRORS_INT64 = {}

# complex32 OpInfo name -> why the lazy run raises.
KNOWN_ERRORS_COMPLEX32 = {}

NAMES = [opinfo.op_name(op) for op in opinfo.float32_ops()]
NAMES_COMPLEX64 = [opinfo.op_name(op) for op in opinfo.ops_for(torch.complex64)]
NAMES_INT64 = [opinfo.op_name(op) for op in opinfo.ops_for(torch.int64)]
NAMES_COMPLEX32 = [opinfo.op_name(op) for op in opinfo.ops_for(torch.complex32)]
COUNT_TEST = "test_pass_no_fallback_count"


def _sweep(request, test_name, dtype):
    """The sweep over the OpInfos this session selected for ``test_name`` (all of them for the count test)."""
    import gc

    import lazycore

    items = [i for i in request.session.items if i.module is request.module]
    if dtype == torch.float32 and any(i.originalname == COUNT_TEST for i in items):
        names = None
    else:
        names = {i.callspec.params["name"] for i in items if hasattr(i, "callspec") and i.originalname == test_name}
    gc.collect()
    lazycore.mark_step()
    return opinfo.sweep(names, batch=True, dtype=dtype, group=GROUP) if names is None or names else {}


@pytest.fixture(scope="module")
def results(request):
    return _sweep(request, "test_opinfo", torch.float32)


@pytest.fixture(scope="module")
def results_complex64(request):
    return _sweep(request, "test_opinfo_complex64", torch.complex64)


@pytest.fixture(scope="module")
def results_int64(request):
    return _sweep(request, "test_opinfo_int64", torch.int64)


@pytest.fixture(scope="module")
def results_complex32(request):
    return _sweep(request, "test_opinfo_complex32", torch.complex32)


def test_known_errors_are_opinfos():
    assert set(KNOWN_ERRORS) <= set(NAMES)
    assert set(KNOWN_ERRORS_COMPLEX64) <= set(NAMES_COMPLEX64)
    assert set(KNOWN_ERRORS_INT64) <= set(NAMES_INT64)
    assert set(KNOWN_ERRORS_COMPLEX32) <= set(NAMES_COMPLEX32)


def _judge(r, name, known):
    if r.status == "skipped":
        pytest.skip(r.detail)
    assert r.status != "mismatch", f"{name}: the lazy device gives a different result: {r.detail}"
    if r.status == "error":
        if name in known:
            pytest.xfail(known[name])
        pytest.fail(f"{name}: the lazy run raised where eager did not: {r.detail}")
    assert r.status in ("pass_no_fallback", "pass_with_fallback")


@pytest.mark.parametrize("name", NAMES)
def test_opinfo(results, name):
    _judge(results[name], name, KNOWN_ERRORS)


@pytest.mark.parametrize("name", NAMES_COMPLEX64)
def test_opinfo_complex64(results_complex64, name):
    """The same over complex64 samples: no wrong value, errors only as listed."""
    _judge(results_complex64[name], name, KNOWN_ERRORS_COMPLEX64)


@pytest.mark.parametrize("name", NAMES_INT64)
def test_opinfo_int64(results_int64, name):
    """The same over int64 samples (integer division, shifts, overflow, ties in sorts)."""
    _judge(results_int64[name], name, KNOWN_ERRORS_INT64)


# CI: test_opinfo_complex64 takes the same complex lowerings (chalf's float16 parts are
# rounded float32 ones); test_complex32_refusals keeps eager's chalf refusals
@BY_HAND
@pytest.mark.parametrize("name", NAMES_COMPLEX32)
def test_opinfo_complex32(results_complex32, name):
    """The same over complex32 (chalf) samples, held as complex<f32> with float16 parts:
    none is skipped for its element type any more."""
    _judge(results_complex32[name], name, KNOWN_ERRORS_COMPLEX32)


def test_pass_no_fallback_count(results):
    counts = opinfo.counts(results)
    assert counts["pass_no_fallback"] >= MIN_PASS_NO_FALLBACK, counts


def test_sparse_and_batch_norm_samples_are_compared():
    """Sparse samples run (a sparse argument stays on the host, the op falls back, a sparse
    result arrives densified, all counted) and batch norm's saved statistics are compared as
    eager returns them, empty outside training: none of these OpInfos is skipped."""
    import lazycore

    lazycore.mark_step()
    names = {"to_sparse", "sparse.mm.reduce", "sparse.sampled_addmm", "native_batch_norm",
             "_native_batch_norm_legit", "_batch_norm_with_update"}
    got = opinfo.sweep(names, batch=True)
    assert set(got) == names
    for name, r in got.items():
        assert r.status in ("pass_no_fallback", "pass_with_fallback") and r.samples > 0, (name, r)
    for name in ("to_sparse", "sparse.mm.reduce", "sparse.sampled_addmm"):
        assert got[name].status == "pass_with_fallback", got[name]


def test_a_grouped_sweep_judges_each_opinfo_alone(restore_lowerings):
    """Several OpInfos in one program (``group``): a wrong lowering (``neg`` to its operand) or a
    raising one (``sign``) fails that OpInfo only, with the status a sweep of it alone gives;
    fallbacks count for the OpInfo that made them; a group of passing OpInfos is one program."""
    import lazycore
    from lazycore.passes import register_lowering

    lazycore.mark_step()
    got = opinfo.sweep({"exp", "mul", "sin"}, batch=True, group=3)
    c = lazycore.metrics.counters()
    assert c["compiles"] + c["cache_hits"] == 1, c
    assert {n: r.status for n, r in got.items()} == dict.fromkeys(("exp", "mul", "sin"), "pass_no_fallback")

    register_lowering("neg", lambda op, rewriter: op.operands[0])
    names = ("exp", "neg", "to_sparse", "mul")
    got = opinfo.sweep(set(names), batch=True, group=len(names))
    assert set(got) == set(names)
    assert got["neg"].status == "mismatch", got["neg"]
    assert got["to_sparse"].status == "pass_with_fallback" and got["to_sparse"].fallbacks, got["to_sparse"]
    assert got["exp"].status == got["mul"].status == "pass_no_fallback", got

    def raising(op, rewriter):
        raise ValueError("this lowering is broken on purpose")

    register_lowering("sign", raising)
    got = opinfo.sweep({"exp", "sign", "neg"}, batch=True, group=3)
    assert got["sign"].status == "error" and "broken on purpose" in got["sign"].detail, got["sign"]
    assert got["neg"].status == "mismatch" and got["exp"].status == "pass_no_fallback", got
