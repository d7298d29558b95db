"""``lazycore.numpy.special``: SciPy's special functions as the lazy namespace's own.

With ``SCIPY_ARRAY_API=1``, ``scipy.special.erfinv(x)`` on a lazy array looks for
a native function of the array's namespace (``xp.special.<name>``, SciPy's hook
for the Array API's coming ``special`` extension), then a generic one, and as a
last resort calls ``np.asarray`` on every argument: a read to the host that no
fallback records. This module is that native namespace: each name is SciPy's own
function, applied so that the frontend decides what runs: a SciPy ufunc reaches
the lazy ``__array_ufunc__`` (lazy where the frontend has its loop, SciPy itself on
materialized inputs, counted, where not); a function that is not a ufunc
(``polygamma``, ``multigammaln``) runs SciPy on materialized inputs, counted as
``scipy.special.<name>``. SciPy is never imported here: only a name SciPy has
already loaded resolves (the lookup is SciPy's own, once SciPy runs).
"""

from __future__ import annotations

import sys

import numpy as np

from . import fallback

_SCIPY = "scipy.special._support_alternative_backends"
_ALIASES = {"digamma": "psi"}


def _scipy_function(name: str):
    """SciPy's NumPy function behind ``scipy.special.<name>`` (its ``_FuncInfo.func``,
    not the dispatching wrapper, which would come back here), or None."""
    backends = sys.modules.get(_SCIPY)
    if backends is None:
        return None
    name = _ALIASES.get(name, name)
    for info in getattr(backends, "_special_funcs", ()):
        if info.func.__name__ == name:
            return info.func
    return None


def __getattr__(name: str):
    func = _scipy_function(name)
    if func is None:
        raise AttributeError(f"module 'lazycore.numpy.special' has no attribute '{name}'")
    if isinstance(func, np.ufunc):
        return func  # its call on a lazy array is the frontend's __array_ufunc__

    def call(*args, **kwargs):
        return fallback.call_numpy(func, args, kwargs, name=f"scipy.special.{name}")

    call.__name__ = name
    call.__doc__ = func.__doc__
    call.__wrapped__ = func
    return call
