"""ndarray's operators and methods, bound to the lazy functions."""

from __future__ import annotations

import operator
import types

import numpy as np

from . import creation as _creation
from . import dtypes, indexing, layouts, pycode, reductions, scalars
from .array import (_new, contiguous, fits_order, from_host, host_laid_out, laid_out, layout_of, ndarray,
                    reshape_target, to_host, value, wrap)
from .fallback import array_function, call_numpy
from .ufunc_methods import array_ufunc
from .ufuncs import UFUNCS, cast, quick


# --- what array.py leaves to the modules built on it ---------------------------------------


def _reshape_method(self, *shape, order="C", copy=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):  # (kron: a NumPy array of sizes)
        shape = shape[0]
    shape = reshape_target(self.size, tuple(int(s) for s in shape))
    if order != "C":
        return call_numpy(np.reshape, (self, shape), {"order": order})
    return self._reshape(shape, copy)


def _array_ufunc_method(self, ufunc, method, *inputs, **kwargs):
    return array_ufunc(ufunc, method, inputs, kwargs)


def _array_function_method(self, func, types, args, kwargs):
    return pycode.array_function(func, args, kwargs)


ndarray.reshape = _reshape_method
ndarray.__getitem__ = indexing.getitem
ndarray.__setitem__ = indexing.setitem
ndarray.__array_ufunc__ = _array_ufunc_method
ndarray.__array_function__ = _array_function_method

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
    if dunder not in ("eq", "ne"):
        setattr(ndarray, f"__{dunder}__", lambda self, other: quick(np_uf, (self, other)))
        return
    unequal = dunder == "ne"

    def op(self, other):
        # NumPy's ``a == None`` compares in its object loop and ``a == "abc"`` finds no loop;
        # either way ``==``/``!=`` give every element unequal (``np.equal`` itself raises on
        # the string): a ``x != None`` filter is all True, not a TypeError
        if other is None or isinstance(other, (str, bytes)):
            return _creation.full(self.shape, unequal, dtype=bool)
        return quick(np_uf, (self, other))

    setattr(ndarray, f"__{dunder}__", op)


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
    order = layouts.check(order)
    if not np.can_cast(self.dtype, dt, casting):
        raise TypeError(f"Cannot cast array data from {self.dtype!r} to {dt!r} according to the rule '{casting}'")
    if dt == self.dtype and not copy and fits_order(self, order):
        return self
    return laid_out(wrap(cast(value(self), dt), dt), order, layout_of(self, order))


def copy(self, order="C"):
    if order == "C":
        return wrap(value(self), self.dtype)
    order = layouts.check(order)
    return laid_out(wrap(value(self), self.dtype), order, layout_of(self, order))


def fill(self, v):
    indexing.setitem(self, (Ellipsis,), v)


ndarray.astype = astype
ndarray.copy = copy
ndarray.fill = fill


# --- issue 5: products, indexing functions (appended block: advanced indexing / linalg) ---------------------

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
    return indexing.take(self, indices, axis=axis, out=out, mode=mode)


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


# --- the rest of numpy.ndarray's documented methods and attributes -----------------------------------
# Lazy where lazycore has the operation (diagonal, conj, round, divmod, ``in``, flat reads);
# through NumPy's function otherwise (``np.nonzero(a)``: lazy where lazycore implements it,
# else a counted fallback; methods that change the array in place write the change back).

from . import complexes as _complexes  # noqa: E402,F401  (.real/.imag)
from .fallback import implements  # noqa: E402
from .ufuncs import asarray_like as _asarray_like  # noqa: E402


def _diagonal_method(self, offset=0, axis1=0, axis2=1):
    return _manipulation.diagonal(self, offset, axis1, axis2)


def _conj_method(self):
    return UFUNCS["conjugate"](self)


@implements(np.round, np.around)
def round_(a, decimals=0, out=None):
    """NumPy's rounding: ``rint(a * 10**decimals) / 10**decimals`` in ``a``'s dtype (divide,
    then multiply, for negative ``decimals``); integers are returned as they are for
    ``decimals >= 0``. Complex arrays, integers to negative ``decimals`` and ``out=`` run
    NumPy, counted."""
    a = _asarray_like(a)
    decimals = operator.index(decimals)
    if out is None and a.dtype.kind in "iu" and decimals >= 0:
        return scalars.result(copy(a)) if a.ndim == 0 else copy(a)
    if out is not None or a.dtype.kind != "f":
        return call_numpy(np.round, (a,), {"decimals": decimals, "out": out})
    if decimals == 0:
        return UFUNCS["rint"](a)
    if decimals > 0:
        f = 10.0 ** decimals
        return _divide(UFUNCS["rint"](UFUNCS["multiply"](a, f)), f)
    f = 10.0 ** -decimals
    return UFUNCS["multiply"](UFUNCS["rint"](_divide(a, f)), f)


def _divide(a, f: float):
    """``a / f`` in ``a``'s dtype. XLA turns a division by a constant into a multiplication
    by its reciprocal, one unit in the last place off IEEE's quotient at times; for float32
    the quotient is taken in float64 and rounded to float32, which is IEEE's float32
    quotient (float64 has more than twice the digits). float64 keeps XLA's rounding."""
    if a.dtype == np.float32:
        return UFUNCS["true_divide"](a.astype(np.float64), f).astype(np.float32)
    return UFUNCS["true_divide"](a, f)


def _round_method(self, decimals=0, out=None):
    return round_(self, decimals, out)


def _divmod(self, other):
    return UFUNCS["floor_divide"](self, other), UFUNCS["remainder"](self, other)


def _rdivmod(self, other):
    return UFUNCS["floor_divide"](other, self), UFUNCS["remainder"](other, self)


def _contains(self, v):
    return bool((self == v).any())


def _delitem(self, key):
    raise ValueError("cannot delete array elements")


def _through_numpy(np_fn, name):
    """``a.name(...)`` as ``np.name(a, ...)``: its lazy version, if any, else NumPy's, counted."""

    def m(self, *args, **kwargs):
        return array_function(np_fn, (self, *args), kwargs)

    m.__name__ = name
    m.__doc__ = getattr(np.ndarray, name).__doc__
    return m


def _numpy_method(name):
    """``a.name(...)`` as NumPy's method on the value, counted; a change it makes in place
    (``a.partition(k)``, ``a.put(...)``) is written back."""
    unbound = getattr(np.ndarray, name)

    def m(self, *args, **kwargs):
        return call_numpy(unbound, (self, *args), kwargs, name=f"numpy.ndarray.{name}")

    m.__name__ = name
    m.__doc__ = unbound.__doc__
    return m


def _host_read(name):
    """Methods that only read the value out (bytes, files, pickles): a barrier, as ``tolist``."""
    unbound = getattr(np.ndarray, name)

    def m(self, *args, **kwargs):
        return unbound(host_laid_out(self), *args, **kwargs)  # (tobytes(order='A') reads memory order)

    m.__name__ = name
    m.__doc__ = unbound.__doc__
    return m


class _Flags:
    """``a.flags``: NumPy's memory-layout flags of the lazy array's layout, and whether it is writeable."""

    __slots__ = ("_a",)

    def __init__(self, a):
        object.__setattr__(self, "_a", a)

    def _layout(self):
        return self._a._standin().flags

    c_contiguous = property(lambda self: self._layout().c_contiguous)
    f_contiguous = property(lambda self: self._layout().f_contiguous)
    contiguous = c_contiguous
    fortran = f_contiguous
    forc = property(lambda self: self._layout().forc)
    fnc = property(lambda self: self._layout().fnc)
    aligned = property(lambda self: True)
    writebackifcopy = property(lambda self: False)
    behaved = property(lambda self: self.writeable)
    carray = property(lambda self: self.writeable and self.c_contiguous)
    farray = property(lambda self: self.writeable and self.f_contiguous and not self.c_contiguous)
    owndata = property(lambda self: not self._a._steps and type(self._a) is ndarray)

    @property
    def writeable(self):
        return self._a._writeable

    @writeable.setter
    def writeable(self, flag):
        _set_writeable(self._a, flag)

    def __getitem__(self, key):
        names = {"C": "c_contiguous", "C_CONTIGUOUS": "c_contiguous", "F": "f_contiguous",
                 "F_CONTIGUOUS": "f_contiguous", "W": "writeable", "WRITEABLE": "writeable", "A": "aligned",
                 "ALIGNED": "aligned", "O": "owndata", "OWNDATA": "owndata", "X": "writebackifcopy",
                 "WRITEBACKIFCOPY": "writebackifcopy", "FNC": "fnc", "FORC": "forc", "BEHAVED": "behaved",
                 "CARRAY": "carray", "FARRAY": "farray"}
        return getattr(self, names[key])

    def __setitem__(self, key, flag):
        if key not in ("W", "WRITEABLE"):
            raise KeyError(f"Unknown flag {key!r}")
        _set_writeable(self._a, flag)

    def __setattr__(self, name, flag):
        if name != "writeable":
            raise AttributeError(f"attribute {name!r} of 'numpy.flagsobj' objects is not writable")
        _set_writeable(self._a, flag)

    def __repr__(self):
        return "\n".join(f"  {k.upper()} : {getattr(self, k)}" for k in
                         ("c_contiguous", "f_contiguous", "owndata", "writeable", "aligned", "writebackifcopy"))


def _set_writeable(a, flag):
    """Read-only is always allowed; back to writeable only for an array owning its value
    (a view's writeability is its base's, which lazycore does not keep: refused, as NumPy
    refuses it for read-only views such as ``diagonal``'s)."""
    if flag:
        if not a._writeable and (a._steps or type(a) is not ndarray):
            raise ValueError("cannot set WRITEABLE flag to True of this array")
        a._writeable = True
    else:
        a._writeable = False


def _setflags(self, write=None, align=None, uic=None):
    if align is not None and not align:
        raise ValueError("cannot set aligned flag of mis-aligned array to True")
    if uic:
        raise ValueError("cannot set WRITEBACKIFCOPY flag to True")
    if write is not None:
        _set_writeable(self, write)


class _FlatIter:
    """``a.flat``: the elements in row-major order. Reads are lazy (of ``a.ravel()``);
    writes go through a reshaped view when ``a`` is C-contiguous, else through NumPy on
    the value (counted), written back."""

    __slots__ = ("base",)

    def __init__(self, a):
        self.base = a

    def __len__(self):
        return self.base.size

    def __iter__(self):
        return iter(self.base.ravel())

    def __getitem__(self, key):
        return self.base.ravel()[key]

    def __setitem__(self, key, val):
        a = self.base
        if a._standin().flags.c_contiguous:
            a.reshape(-1)[key] = val
            return

        def assign(host, key, val):
            host.flat[key] = val

        call_numpy(assign, (a, key, val), {}, name="numpy.ndarray.flat.__setitem__")

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.base.ravel(), dtype=dtype)

    def copy(self):
        return self.base.flatten()


def _resize(self, *new_shape, refcheck=True):
    """``a.resize(shape)``: in place, zero-filled, for an array owning its value (NumPy refuses
    views: their memory is another array's). Counted: NumPy resizes the value."""
    if self._steps or type(self) is not ndarray:
        raise ValueError("cannot resize this array: it does not own its data")
    if len(new_shape) == 1 and (new_shape[0] is None or isinstance(new_shape[0], (tuple, list))):
        new_shape = new_shape[0]

    def resized(host, shape):
        host = host.copy()
        host.resize(shape, refcheck=False)
        return host

    new = call_numpy(resized, (self, new_shape), {}, name="numpy.ndarray.resize")
    self._storage, self._steps, self._shape = new._storage, (), new._shape
    self._estrides, self._offset, self._cache = new._estrides, 0, None


ndarray.diagonal = _diagonal_method
ndarray.conj = ndarray.conjugate = _conj_method
ndarray.round = _round_method
# NumPy's scalars are Python-roundable (``round(s)``: a Python int, a barrier); its arrays are not
scalars.scalar.__round__ = lambda self, ndigits=None: (round(to_host(self)[()]) if ndigits is None
                                                       else _round_method(self, ndigits))
ndarray.__divmod__ = _divmod
ndarray.__rdivmod__ = _rdivmod
ndarray.__contains__ = _contains
ndarray.__delitem__ = _delitem
ndarray.__class_getitem__ = classmethod(lambda cls, item: types.GenericAlias(cls, item))
ndarray.flags = property(_Flags)
ndarray.setflags = _setflags
ndarray.flat = property(_FlatIter, lambda self, v: _FlatIter(self).__setitem__(Ellipsis, v))
ndarray.resize = _resize
for _name in ("nonzero", "searchsorted", "choose", "argpartition", "put"):
    setattr(ndarray, _name, _through_numpy(getattr(np, _name), _name))


def _compress(self, condition, axis=None, out=None):
    return array_function(np.compress, (condition, self, axis, out), {})  # np.compress takes the condition first


ndarray.compress = _compress
for _name in ("partition", "byteswap", "getfield", "setfield"):
    setattr(ndarray, _name, _numpy_method(_name))
for _name in ("tobytes", "tofile", "dump", "dumps"):
    setattr(ndarray, _name, _host_read(_name))


def _host_memory(self) -> np.ndarray:
    """The value in host memory laid out as NumPy would lay this array out (its strides,
    and its offset into its base's buffer, so a view's memoryview has NumPy's strides and
    contiguity), for the memory interfaces: a barrier. Read-only: the lazy array does not
    live in that memory, so a write through it could not reach the array; a write
    through ``a.data`` raises, where one through a ``ctypes`` pointer would be lost."""
    storage, dt = self._storage, self._dtype
    shape, phys = tuple(storage.handle.shape), storage.strides
    host = None
    if self.size and dtypes.TO_NUMPY[storage.handle.dtype] == dt and all(s >= 0 for s in phys):
        whole = to_host(_new(storage, (), shape, dt, contiguous(shape), 0, False))
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, phys))
        buf = np.empty(extent, dt)
        np.lib.stride_tricks.as_strided(buf, shape, tuple(s * dt.itemsize for s in phys))[...] = whole
        try:
            host = np.ndarray(self._shape, dt, buf, self._offset * dt.itemsize, self.strides)
        except (TypeError, ValueError):  # (a layout NumPy would not take over this buffer: a copy then)
            host = None
    if host is None:
        host = to_host(self)
    host.flags.writeable = False
    return host


# NumPy's memory interfaces: ``a.data`` (a memoryview) and ``a.ctypes`` (pointer, shape
# and strides for C code) of a host copy of the value (see _host_memory)
ndarray.data = property(lambda self: memoryview(_host_memory(self)),
                        doc="A read-only memoryview of the value on the host (a barrier).")
ndarray.ctypes = property(lambda self: _host_memory(self).ctypes,
                          doc="NumPy's ctypes interface to a read-only host copy of the value (a barrier).")


def _no_ctypes(self):
    raise AttributeError(f"'numpy.{self._dtype.type.__name__}' object has no attribute 'ctypes'")


scalars.scalar.ctypes = property(_no_ctypes)  # NumPy's scalars have ``data`` and no ``ctypes``


def _base(self):
    """NumPy's ``base``: None for an array owning its value; for a view, an array of the
    whole value it views (lazycore keeps the value a view reads, not the array object it
    was made from: ``a[1:].base`` is an array equal to ``a``, not ``a`` itself)."""
    if not self._steps and type(self) is ndarray:
        return None
    h = self._storage.handle
    shape = tuple(h.shape)
    return _new(self._storage, (), shape, dtypes.TO_NUMPY[h.dtype], self._storage.strides, 0, self._writeable)


def _setstate(self, state):
    """Unpickling NumPy's way (``ndarray.__setstate__``'s state tuple): the array becomes
    that value (lazycore's own pickles go through ``__reduce__``: an upload)."""
    host = np.ndarray(())
    host.__setstate__(state)
    new = from_host(host)
    self._storage, self._steps, self._shape, self._dtype = new._storage, (), new._shape, new._dtype
    self._estrides, self._offset, self._cache, self._writeable = new._estrides, 0, None, True


ndarray.base = property(_base)
ndarray.__setstate__ = _setstate
