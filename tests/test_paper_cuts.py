"""Paper cuts users hit (issue 43), each with the program that reproduced it.

1. ``to_device`` of a lazycore.numpy array takes the device names lazycore
   prints (``"cpu:0"``) and the objects it gives back (``x.device``).
2. ``guard(compiles="error")`` around a plain training loop: the optimizer's
   state appearing at the second step is warm-up; a loop whose shapes keep
   changing still raises.
4. No native log noise: a mesh compile and a long elementwise chain print
   nothing on stderr.
5. Device names of a mesh: per process, not jax's global ids.
"""

from __future__ import annotations

import numpy
import pytest

import lazycore.numpy as lnp


# --- 1. to_device takes lazycore's own device names ----------------------------------------------


def test_to_device_takes_the_names_lazycore_prints(clean_runtime):
    a = lnp.asarray(numpy.arange(3.0))
    name = str(a.device)  # what lazycore prints: "cpu:0" (or "gpu:0")
    assert a.to_device(name) is a
    assert a.to_device(a.device) is a
    assert a.to_device(lnp.__array_namespace_info__().default_device()) is a
    platform = name.split(":")[0]
    assert a.to_device(platform) is a  # a platform alone is its device 0, as NumPy's "cpu"
    same = lnp.astype(a, "float32", device=name)
    numpy.testing.assert_array_equal(numpy.asarray(same), numpy.arange(3.0, dtype=numpy.float32))
    assert lnp.from_dlpack(a, device=name) is a
    assert list(lnp.__array_namespace_info__().dtypes(device=name)) == list(
        lnp.__array_namespace_info__().dtypes())
    for other in (f"{platform}:7", "nowhere", 0):
        with pytest.raises(ValueError, match="Unsupported device|Device not understood"):
            a.to_device(other)
