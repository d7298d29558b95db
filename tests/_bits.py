"""Helpers shared by tests: bit-for-bit comparison of float arrays (the exactness tests), index checks found in StableHLO text."""

import re

import numpy
import pytest


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


def cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            found = re.search(r"^vendor_id\s*:\s*(\S+)", f.read(), re.M)
    except OSError:
        return ""
    return found.group(1) if found else ""


_VENDOR = cpu_vendor()

INTEL_KERNELS = pytest.mark.skipif(_VENDOR != "GenuineIntel",
                                   reason=f"eager's MKL runs other code on this CPU ({_VENDOR or 'unknown'}): "
                                          "the summation orders lazycore copies are MKL's Intel ones")
"""The marker of tests that claim eager's bits where lazycore copies the summation
order of MKL's Intel code (its small-K GEMM chains, addbmm's batch order, the
optimizers' products through them): MKL picks its code by CPU vendor, and on an
AMD EPYC (2026-12-02) eager's products sum in other orders, so those claims are
made, and checked, on Intel CPUs."""
