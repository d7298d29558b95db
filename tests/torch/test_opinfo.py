"""PyTorch's OpInfo database on the lazy device against eager CPU.

The sweep (:mod:`lazycore.frontends.torch.opinfo`) runs once per module, one
program per OpInfo, for the OpInfos selected; each test reads its OpInfo's
result. A wrong value is never acceptable; an error is acceptable only for
the known limitations listed in KNOWN_ERRORS, each with its reason.
"""

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal imports it

from lazycore.frontends.torch import opinfo  # noqa: E402

MIN_PASS_NO_FALLBACK = 150

_COMPLEX = "needs complex intermediate values; lazycore has no complex element type"

# OpInfo name -> why the lazy run raises. Only errors are excused here, never wrong values.
KNOWN_ERRORS = {
    "fft.hfft": _COMPLEX,
    "fft.hfft2": _COMPLEX,
    "fft.hfftn": _COMPLEX,
    "fft.irfft": _COMPLEX,
    "fft.irfft2": _COMPLEX,
    "fft.irfftn": _COMPLEX,
    "stft": _COMPLEX,
    "resize_": "lazy tensors cannot be resized to another shape",
}

NAMES = [opinfo.op_name(op) for op in opinfo.float32_ops()]
COUNT_TEST = "test_pass_no_fallback_count"


@pytest.fixture(scope="module")
def results(request):
    """The sweep over the OpInfos this session selected (all of them for the count test)."""
    import gc

    import lazycore

    items = [i for i in request.session.items if i.module is request.module]
    if any(i.originalname == COUNT_TEST for i in items):
        names = None
    else:
        names = {i.callspec.params["name"] for i in items if hasattr(i, "callspec")}
    gc.collect()
    lazycore.mark_step()
    return opinfo.sweep(names, batch=True)


def test_known_errors_are_opinfos():
    assert set(KNOWN_ERRORS) <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_opinfo(results, name):
    r = results[name]
    if r.status == "skipped":
        pytest.skip(r.detail)
    assert r.status != "mismatch", f"{name}: the lazy device gives a different result: {r.detail}"
    if r.status == "error":
        if name in KNOWN_ERRORS:
            pytest.xfail(KNOWN_ERRORS[name])
        pytest.fail(f"{name}: the lazy run raised where eager did not: {r.detail}")
    assert r.status in ("pass_no_fallback", "pass_with_fallback")


def test_pass_no_fallback_count(results):
    counts = opinfo.counts(results)
    assert counts["pass_no_fallback"] >= MIN_PASS_NO_FALLBACK, counts
