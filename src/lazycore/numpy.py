"""``import lazycore.numpy as lnp``: NumPy's API on lazy arrays.

The NumPy frontend is the package :mod:`lazycore.frontends.numpy`; this
module hands its names on, so each module has one name (the frontend's
functions, classes and ``linalg``/``fft``/``random`` are the same objects
here). The eager mode (``LAZYCORE_EAGER=1``, ``lazycore.config.eager()``)
swaps the frontend's functions for ones that run at once; this module takes
the frontend's names again whenever the mode changes, after the frontend has
swapped them, so a call through ``lnp`` is the frontend's call in either
mode. A NumPy function the frontend does not define reaches the frontend's
fallback (NumPy itself on materialized inputs).
"""

from lazycore.frontends import numpy as _frontend
from lazycore.ir import config as _config

# the Array API's module-level names a namespace must carry
_HANDED_ON_DUNDERS = ("__array_api_version__", "__array_namespace_info__")


def _take_names(_mode=None) -> None:
    globals().update({name: value for name, value in vars(_frontend).items()
                      if not name.startswith("_") or name in _HANDED_ON_DUNDERS})


_take_names()
# registered after the frontend's own watcher: called once it has swapped
_config.watch("eager", _take_names)


def __getattr__(name: str):
    return getattr(_frontend, name)


def __dir__():
    return dir(_frontend)
