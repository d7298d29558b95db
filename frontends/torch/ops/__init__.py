"""ATen lowerings, one module per op family; importing registers them."""

from . import conv, elementwise, factories, fft, indexing, linalg, nn, random, reduction, shape  # noqa: F401
