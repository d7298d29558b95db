"""NumPy's generalized ufuncs (``matmul``, ``vecdot``, ``matvec``, ``vecmat``) as ufunc objects.

NumPy 2 makes these products ufuncs with a core signature
(``numpy.matvec.signature == "(m,n),(n)->(m)"``): objects with ``nin``,
``nout``, ``types``, ``identity`` and the ufunc methods. Here each is a
:class:`gufunc`: NumPy's attributes, a lazy call (:func:`.linalg.matmul`'s
``dot_general``, or :func:`.linalg.vecdot`'s product summed in the loop's
type) and NumPy's own errors. The shapes are checked here first; where they
do not fit (and for the ufunc methods NumPy refuses generalized ufuncs),
NumPy's gufunc runs on stand-ins of the arguments that hold one element each
(zero strides), and its exception is the user's, raised at the call without
reading any value. What the lazy call does not take (``axes=``,
``signature=``, ``where=``) is NumPy's on the values, counted.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index
from numpy.lib.stride_tricks import as_strided

from . import linalg
from .array import ndarray
from .fallback import call_numpy
from .scalars import result
from .ufuncs import UFUNCS, asarray_like, store_out, ufunc

_conjugate = UFUNCS["conjugate"]


class gufunc(ufunc):
    """A lazy generalized ufunc: NumPy's attributes, a lazy call."""

    def __init__(self, uf, call):
        super().__init__(uf)
        self._call = call

    def __call__(self, *inputs, **kwargs):
        return self._call(self._uf, inputs, kwargs)


def _method(name):
    def m(self, *args, **kwargs):
        standins = [_standin(x) for x in args]
        # NumPy refuses the methods that need a scalar kernel for a core signature:
        # its words, read off arguments that hold no values of the user's
        getattr(self._uf, name)(*standins, **kwargs)
        return call_numpy(getattr(self._uf, name), args, kwargs, name=f"numpy.{self.__name__}.{name}")

    m.__name__ = name
    m.__doc__ = getattr(np.ufunc, name).__doc__
    return m


for _name in ("reduce", "accumulate", "outer", "at", "reduceat"):
    setattr(gufunc, _name, _method(_name))


def _standin(x, writeable=False):
    """``x``'s shape and dtype over one element (zero strides): NumPy checks shapes on it."""
    if isinstance(x, ndarray):
        shape, dtype = x.shape, x.dtype
    elif isinstance(x, (list, tuple)) and not any(isinstance(v, ndarray) for v in x):
        return x  # (indices of ``at``, an ``axes=`` list)
    elif isinstance(x, np.ndarray):
        shape, dtype = x.shape, x.dtype
    else:
        return x
    return as_strided(np.zeros(1, dtype), shape, (0,) * len(shape), writeable=writeable)


def _core_dims(signature: str):
    """``"(m,n),(n)->(m)"`` -> (``[("m", "n"), ("n",)]``, ``[("m",)]``)."""
    ins, outs = signature.split("->")

    def parse(part):
        return [tuple(d for d in g.split(",") if d) for g in part.strip("()").split("),(")]

    return parse(ins), parse(outs)


def _numpys_error(uf, inputs, kwargs):
    """NumPy's exception for a call whose shapes do not fit, from stand-ins of its arrays."""
    args = [_standin(x) for x in inputs]
    kw = dict(kwargs)
    if kw.get("out") is not None:
        out = kw["out"]
        kw["out"] = tuple(_standin(o, True) for o in out) if isinstance(out, tuple) else _standin(out, True)
    uf(*args, **kw)
    raise AssertionError(f"lazycore.numpy: numpy.{uf.__name__} took shapes this module refused")


_LAZY_KEYWORDS = {"out", "dtype", "casting", "order", "subok", "axis"}


def _products(uf, inputs, kwargs):
    """``vecdot``, ``matvec`` and ``vecmat`` lazily: NumPy's loop dtype, broadcast loop
    dims, the product and sum of :mod:`.linalg` (the first vector conjugated where
    NumPy conjugates it: ``vecdot``, ``vecmat``)."""
    name = uf.__name__
    if (set(kwargs) - _LAZY_KEYWORDS or len(inputs) != uf.nin or kwargs.get("order", "K") not in "KCA"
            or kwargs.get("subok", True) is not True or ("axis" in kwargs and name != "vecdot")):
        return call_numpy(uf, inputs, kwargs, name=f"numpy.{name}")
    out = kwargs.get("out")
    if isinstance(out, tuple):
        if len(out) != 1:
            return call_numpy(uf, inputs, kwargs, name=f"numpy.{name}")
        (out,) = out
    if out is not None and not isinstance(out, ndarray):  # (a host array to write into: NumPy's)
        return call_numpy(uf, inputs, kwargs, name=f"numpy.{name}")
    casting = kwargs.get("casting", "same_kind")
    dtype = kwargs.get("dtype")
    a, b = (asarray_like(x) for x in inputs)
    axis = kwargs.get("axis")
    if axis is not None:  # (vecdot: the vectors' dim, in every operand)
        try:
            a, b = (x.swapaxes(normalize_axis_index(axis, x.ndim), -1) if x.ndim else x for x in (a, b))
        except np.exceptions.AxisError:
            _numpys_error(uf, inputs, kwargs)
    (ca, cb), (co,) = _core_dims(uf.signature)
    sizes, fits = {}, a.ndim >= len(ca) and b.ndim >= len(cb)
    loop = ()
    if fits:
        for x, core in ((a, ca), (b, cb)):
            for d, n in zip(core, x.shape[x.ndim - len(core):]):
                fits = fits and sizes.setdefault(d, n) == n
        try:
            loop = np.broadcast_shapes(a.shape[:a.ndim - len(ca)], b.shape[:b.ndim - len(cb)])
        except ValueError:
            fits = False
    want = tuple(loop) + tuple(sizes.get(d) for d in co)
    if not fits or (isinstance(out, ndarray) and out.shape != want):
        _numpys_error(uf, inputs, kwargs)
    dt = _loop(uf, a, b, dtype, casting)
    a, b = (x.astype(t, copy=False) for x, t in zip((a, b), dt[:2]))
    if name == "vecdot":
        res = linalg.vecdot(a, b)
    elif name == "matvec":
        res = linalg.matmul(a, b.reshape(b.shape + (1,)))
    else:  # vecmat: conj(v) @ A
        v = _conjugate(a) if a.dtype.kind == "c" else a
        res = linalg.matmul(v.reshape(v.shape[:-1] + (1,) + v.shape[-1:]), b)
    res = res.reshape(want) if res.shape != want else res
    if res.dtype != dt[2]:
        res = res.astype(dt[2])
    if out is None:
        return result(res)
    if isinstance(out, ndarray) and not np.can_cast(dt[2], out.dtype, casting):
        raise TypeError(f"Cannot cast ufunc '{name}' output from {dt[2]!r} to {out.dtype!r} with casting rule "
                        f"'{casting}'")
    return store_out(res, out, name + ": output array has wrong shape {got}, expected {want}")


def _loop(uf, a, b, dtype, casting):
    """NumPy's loop for these operands; ``dtype=`` fixes the output, as NumPy's
    ``signature=(None, None, dtype)`` (it picks the loop, not a cast of its result)."""
    fixed = {} if dtype is None else {"signature": (None, None, np.dtype(dtype))}
    return uf.resolve_dtypes((a.dtype, b.dtype, None), casting=casting, **fixed)


def _matmul(uf, inputs, kwargs):
    """:func:`.linalg.matmul`, given operands of the loop ``dtype=`` picks."""
    if kwargs.get("dtype") is not None and len(inputs) == 2 and not set(kwargs) - _LAZY_KEYWORDS:
        a, b = (asarray_like(x) for x in inputs)
        dt = _loop(uf, a, b, kwargs["dtype"], kwargs.get("casting", "same_kind"))
        inputs = (a.astype(dt[0], copy=False), b.astype(dt[1], copy=False))
        kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
    return linalg.matmul(*inputs, **kwargs)


_CALLS = {"matmul": _matmul, "vecdot": _products, "matvec": _products, "vecmat": _products}

GUFUNCS = {name: gufunc(getattr(np, name), call) for name, call in _CALLS.items() if hasattr(np, name)}
"""NumPy's top-level generalized ufuncs, by name (``matvec``/``vecmat``: NumPy 2.2 on)."""

BY_UFUNC = {g._uf: g for g in GUFUNCS.values()}
"""NumPy's gufunc -> ours (``numpy.matvec(lazy, ...)`` reaches ``__array_ufunc__`` with NumPy's)."""
