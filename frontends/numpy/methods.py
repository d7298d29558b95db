"""ndarray's operators and methods, bound to the lazy functions."""

from __future__ import annotations

import numpy as np

from . import reductions
from .array import ndarray, value, wrap
from .ufuncs import UFUNCS, cast

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal",
            "ne": "not_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}


def _bind_binary(dunder: str, name: str):
    uf = UFUNCS[name]

    def op(self, other):
        return uf(self, other)

    def rop(self, other):
        return uf(other, self)

    def iop(self, other):
        return uf(self, other, out=self)

    setattr(ndarray, f"__{dunder}__", op)
    setattr(ndarray, f"__r{dunder}__", rop)
    setattr(ndarray, f"__i{dunder}__", iop)


for _d, _n in _BINARY.items():
    _bind_binary(_d, _n)
for _d, _n in _COMPARE.items():
    setattr(ndarray, f"__{_d}__", (lambda uf: lambda self, other: uf(self, other))(UFUNCS[_n]))
for _d, _n in _UNARY.items():
    setattr(ndarray, f"__{_d}__", (lambda uf: lambda self: uf(self))(UFUNCS[_n]))


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    m.__name__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


for _name in ("sum", "prod", "max", "min", "mean", "any", "all"):
    setattr(ndarray, _name, _method(getattr(reductions, _name)))


def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    dt = np.dtype(dtype)
    if not np.can_cast(self.dtype, dt, casting):
        raise TypeError(f"Cannot cast array data from {self.dtype!r} to {dt!r} according to the rule '{casting}'")
    if dt == self.dtype and not copy:
        return self
    return wrap(cast(value(self), dt), dt)


def copy(self, order="C"):
    return wrap(value(self), self.dtype)


def fill(self, v):
    from .indexing import setitem

    setitem(self, (Ellipsis,), v)


ndarray.astype = astype
ndarray.copy = copy
ndarray.fill = fill
