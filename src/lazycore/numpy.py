"""``import lazycore.numpy as np``: the NumPy frontend (see :mod:`lazycore.frontends.numpy`)."""

import sys

from lazycore.frontends import numpy as _frontend

sys.modules[__name__] = _frontend
