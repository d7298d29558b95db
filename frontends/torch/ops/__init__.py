"""ATen lowerings, one module per op family; importing registers them."""

from . import (conv, elementwise, embedding_bag, factories, fft, grouped_mm, histogram, indexing, linalg,  # noqa: F401
               nn, random, reduction, shape)
from . import float8  # noqa: F401,E402 - last: it wraps lowerings of the modules above
