"""Bit-for-bit comparison of float arrays, shared by the exactness tests."""

import numpy


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
