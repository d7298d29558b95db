"""Helpers shared by tests: bit-for-bit comparison of float arrays (the exactness tests), index checks found in
StableHLO text, the variants and model runs CI leaves to the by-hand run."""

import functools
import os
import re

import numpy
import pytest


FULL = os.environ.get("LAZYCORE_TEST_FULL") == "1"
BY_HAND = pytest.mark.skipif(not FULL, reason="a variant whose path CI runs in another (the suite's 40 minutes): "
                                              "LAZYCORE_TEST_FULL=1")
"""The mark of a test or parametrized variant CI leaves out, where a test CI keeps takes the same path
(one prompt and a batch of them, one optimizer of a family; a comment above it names the test that
keeps it): the by-hand run (``LAZYCORE_TEST_FULL=1``) runs it, as it runs the model families' other members."""

MODEL_RUN = pytest.mark.skipif(not FULL, reason="a model run: LAZYCORE_TEST_FULL=1")
"""The mark of a whole model's run CI leaves to the by-hand run: ``LAZYCORE_TEST_FULL=1`` runs it."""


def bits_equal(got, want):
    """The same bits in every element but NaN, which need only be NaN in both."""
    got, want = numpy.asarray(got), numpy.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    both_nan = numpy.isnan(got.astype(numpy.float64)) & numpy.isnan(want.astype(numpy.float64))
    unsigned = {2: numpy.uint16, 4: numpy.uint32, 8: numpy.uint64}[got.dtype.itemsize]
    differ = (got.view(unsigned) != want.view(unsigned)) & ~both_nan
    assert not differ.any(), (
        f"{int(differ.sum())} of {differ.size} differ, e.g. got {got[differ][:4]} want {want[differ][:4]}"
    )


_DEF = re.compile(r"^\s*(%[\w#]+)(?::\d+)? = (.*)$")
_MASK_CONVERT = re.compile(r"^stablehlo\.convert %\S+ : \(tensor<[\dx]*i1>\) -> tensor<[\dx]*f32>")
_SUM = re.compile(r"^stablehlo\.reduce\((%[\w#]+) init: %\S+\) applies stablehlo\.add across dimensions = "
                  r"\[([\d, ]*)\] : \(tensor<([\dx]*)xf32>")


def check_reductions(stablehlo: str) -> list[tuple[str, str]]:
    """``(dims, shape)`` of each index check's reduction in StableHLO text: a
    float sum of a boolean mask converted to f32 (how the frontends reduce an
    index check's mask), told from the program's other float sums by its
    operand. A name is looked up at its latest definition above the use, as
    each function numbers its values anew."""
    masks: dict[str, bool] = {}
    found = []
    for line in stablehlo.splitlines():
        d = _DEF.match(line)
        if not d:
            continue
        name, rhs = d.groups()
        s = _SUM.match(rhs)
        if s and masks.get(s.group(1)):
            found.append((s.group(2), s.group(3)))
        masks[name] = bool(_MASK_CONVERT.match(rhs))
    return found


def _cpuinfo_field(name: str) -> str:
    """The first ``name : value`` line of /proc/cpuinfo's value ("" if none)."""
    try:
        with open("/proc/cpuinfo") as f:
            found = re.search(rf"^{name}\s*:\s*(.*)$", f.read(), re.M)
    except OSError:
        return ""
    return found.group(1).strip() if found else ""


def cpu_vendor() -> str:
    return _cpuinfo_field("vendor_id").split(" ")[0]


def cpu_has_avx512() -> bool:
    """Whether the CPU has AVX-512 (``avx512f``): eager's and NumPy's kernels pick
    other code without it (oneDNN's gelu, softmax's 16 lanes, NumPy's SIMD loops)."""
    return "avx512f" in _cpuinfo_field("flags").split()


_VENDOR = cpu_vendor()

INTEL_KERNELS = pytest.mark.skipif(_VENDOR != "GenuineIntel",
                                   reason=f"eager's MKL runs other code on this CPU ({_VENDOR or 'unknown'}): "
                                          "the summation orders lazycore copies are MKL's Intel ones")
"""The marker of tests that claim eager's bits where lazycore copies the summation
order of MKL's Intel code (its small-K GEMM chains, addbmm's batch order, the
optimizers' products through them): MKL picks its code by CPU vendor, and on an
AMD EPYC (2026-12-02) eager's products sum in other orders, so those claims are
made, and checked, on Intel CPUs."""


@functools.cache
def eager_sqrt_is_ieee() -> bool:
    """Whether eager's contiguous float32 ``sqrt`` here is correctly rounded. ATen
    sends it to MKL's ``vsSqrt`` (VML_HA), which picks its code by CPU: on an AMD
    EPYC (2026-12-04) about one value in five is 1 ulp off IEEE's root (within 0.75
    ulp; the same bits as ``vmsSqrt`` called through ctypes), while lazycore's
    ``sqrt`` is XLA's, correctly rounded as IEEE defines it. That kernel is not
    modelled."""
    import torch

    x = torch.linspace(1e-3, 4, 4096)
    return bool(torch.equal(x.sqrt(), x.double().sqrt().float()))


def ieee_sqrt():
    """A context in which eager's float32 ``sqrt`` is IEEE's (the float64 root
    rounded once, which is the correctly rounded float32 root): the reference for
    tests that claim eager's bits through a ``sqrt`` (Adam's denominator) on a CPU
    where :func:`eager_sqrt_is_ieee` is false; everything else is eager's."""
    import contextlib

    import torch
    from torch.overrides import TorchFunctionMode

    if eager_sqrt_is_ieee():
        return contextlib.nullcontext()

    roots = {torch.sqrt, torch.Tensor.sqrt}

    class _IEEESqrt(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            x = args[0] if args else None
            if func in roots and isinstance(x, torch.Tensor) and x.dtype == torch.float32 and not kwargs:
                return x.double().sqrt().float()
            return func(*args, **kwargs)

    return _IEEESqrt()
