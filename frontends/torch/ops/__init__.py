"""ATen lowerings, one module per op family; importing registers them."""

from . import elementwise, factories, linalg, random, reduction, shape  # noqa: F401
