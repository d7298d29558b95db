"""ndarray's operators and methods, bound to the lazy functions."""

from __future__ import annotations

import numpy as np

from . import reductions, scalars
from .array import ndarray, value, wrap
from .ufuncs import UFUNCS, cast, quick

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal",
            "ne": "not_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}


def _bind_binary(dunder: str, name: str):
    uf = UFUNCS[name]
    np_uf = uf._uf

    def op(self, other):
        return quick(np_uf, (self, other))

    def rop(self, other):
        return quick(np_uf, (other, self))

    def iop(self, other):
        return uf(self, other, out=self)

    setattr(ndarray, f"__{dunder}__", op)
    setattr(ndarray, f"__r{dunder}__", rop)
    setattr(ndarray, f"__i{dunder}__", iop)


def _bind_compare(dunder: str, name: str):
    np_uf = UFUNCS[name]._uf
    setattr(ndarray, f"__{dunder}__", lambda self, other: quick(np_uf, (self, other)))


def _bind_unary(dunder: str, name: str):
    np_uf = UFUNCS[name]._uf
    setattr(ndarray, f"__{dunder}__", lambda self: quick(np_uf, (self,)))


for _d, _n in _BINARY.items():
    _bind_binary(_d, _n)
scalars.bind_inplace_operators(_BINARY)
for _d, _n in _COMPARE.items():
    _bind_compare(_d, _n)
for _d, _n in _UNARY.items():
    _bind_unary(_d, _n)


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


# --- issue 5: products, indexing functions (appended block: advanced indexing / linalg) ---------------------

from . import indexing as _indexing  # noqa: E402  (also publishes np.take & co.)
from . import linalg as _linalg  # noqa: E402  (also publishes np.dot, np.matmul & co.)


def _matmul(self, other):
    return _linalg.matmul(self, other)


def _rmatmul(self, other):
    return _linalg.matmul(other, self)


def _imatmul(self, other):
    # NumPy: in place only when the product keeps self's shape and casts back same_kind
    res = _linalg.matmul(self, other)
    if res.shape != self.shape:
        raise ValueError(f"matmul: In-place matrix multiplication requires the output shape {self.shape} to "
                         f"match the result shape {res.shape}")
    return _linalg.matmul(self, other, out=self)


def _dot_method(self, b, out=None):
    return _linalg.TOP["dot"](self, b, out=out)


def _trace_method(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return _linalg.TOP["trace"](self, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype, out=out)


def _take_method(self, indices, axis=None, out=None, mode="raise"):
    return _indexing.take(self, indices, axis=axis, out=out, mode=mode)


ndarray.__matmul__ = _matmul
ndarray.__rmatmul__ = _rmatmul
ndarray.__imatmul__ = _imatmul
ndarray.dot = _dot_method
ndarray.trace = _trace_method
ndarray.take = _take_method
scalars.bind_inplace_operators(("matmul",))  # NumPy's scalars: ``s @= x`` is ``s = s @ x``


# --- issue 5: reductions and shape manipulation (appended block: reductions / manipulation) ------------------

from . import manipulation as _manipulation  # noqa: E402

for _name in ("std", "var", "argmax", "argmin", "cumsum", "cumprod", "ptp"):
    setattr(ndarray, _name, _method(getattr(reductions, _name)))


def _squeeze_method(self, axis=None):
    return _manipulation.squeeze(self, axis=axis)


def _repeat_method(self, repeats, axis=None):
    return _manipulation.repeat(self, repeats, axis=axis)


def _clip_method(self, min=None, max=None, out=None, **kwargs):
    return _manipulation.clip(self, min, max, out=out, **kwargs)


def _ravel_method(self, order="C"):
    # NumPy copies unless C-contiguous, even where a strided view would do
    return _manipulation.ravel(self, order=order)


ndarray.squeeze = _squeeze_method
ndarray.repeat = _repeat_method
ndarray.clip = _clip_method
ndarray.ravel = _ravel_method
