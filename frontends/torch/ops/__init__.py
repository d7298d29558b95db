"""ATen lowerings, one module per op family; importing registers them."""

from . import conv, elementwise, factories, fft, histogram, indexing, linalg, nn, random, reduction, shape  # noqa: F401
from . import float8  # noqa: F401,E402 - last: it wraps lowerings of the modules above
