"""NumPy dtypes <-> lazy dialect element types: the dialect's one table
(:mod:`lazycore.dialect.types`), keyed both ways, with NumPy's error."""

from __future__ import annotations

import numpy as np

from lazycore.dialect.types import DTYPES, to_numpy_dtype

TO_NUMPY = {t: to_numpy_dtype(t) for t in DTYPES}
TO_LAZY = {v: k for k, v in TO_NUMPY.items()}


def supported(dtype) -> bool:
    return np.dtype(dtype) in TO_LAZY


def lazy_dtype(dtype) -> str:
    try:
        return TO_LAZY[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"lazycore.numpy has no element type for {np.dtype(dtype)}") from None
