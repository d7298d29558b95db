"""The lazy ndarray: NumPy's array API over a lazycore value.

An :class:`ndarray` is a storage (one lazycore handle, shared by a base and
its views) plus view steps (:mod:`lazycore.views`), with NumPy's metadata:
shape, dtype, and the strides and offset NumPy would give it (in elements),
so views, copies and ``reshape`` follow NumPy's rules exactly. NumPy itself
decides them: every view operation is first applied to a *memory-less
stand-in* (:meth:`ndarray._standin`, an ``as_strided`` array over an
untouched buffer), which gives the result's shape, strides and offset and
raises NumPy's own errors (``IndexError``, ``ValueError``) at the call.

Reading and writing through views is recorded once per signature and
replayed (:func:`lazycore.views.read` and :func:`~lazycore.views.write`).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from lazycore.ir.context import LOCK as _LOCK
from lazycore.ir.memo import Memo
from lazycore.trace import core
from lazycore.runtime import device as _lc_device
from lazycore.trace import views
from lazycore.trace.views import Permute, Reshape, Storage

from . import dtypes, layouts
from .hostguard import refuse_read, refuse_write

_DEVICE = None


def device():
    """Where lazy arrays live: the accelerator if jaxlib sees one, else the CPU."""
    global _DEVICE
    if _DEVICE is None:
        devs = _lc_device.devices()
        _DEVICE = next((d for d in devs if d.platform != "cpu"), devs[0])
    return _DEVICE


class ndarray:
    """A lazy array; build one with :func:`lazycore.numpy.asarray` and friends."""

    __slots__ = ("_storage", "_steps", "_shape", "_dtype", "_estrides", "_offset", "_writeable", "_cache",
                 "__weakref__")
    __array_priority__ = 1000  # binary ops with NumPy arrays come here

    # --- metadata (never a barrier) -------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @shape.setter
    def shape(self, shape) -> None:
        """NumPy's ``a.shape = ...``: this array becomes a view of the new shape over the
        same memory, or AttributeError where that needs a copy (a size that does not fit
        is reshape's ValueError)."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        reshape_target(self.size, tuple(operator.index(s) for s in shape))  # NumPy's ValueError first
        refuse_write(self._storage)  # (the array itself changes)
        try:
            new = self.reshape(shape, copy=False)
        except ValueError:
            raise AttributeError("Incompatible shape for in-place modification. Use `.reshape()` to make a "
                                 "copy with the desired shape.") from None
        for slot in ("_storage", "_steps", "_shape", "_estrides", "_offset", "_cache"):
            setattr(self, slot, getattr(new, slot))

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(s * self.itemsize for s in self._estrides)

    @property
    def device(self):
        return self._storage.handle.device

    @property
    def T(self) -> "ndarray":
        return self.transpose()

    @property
    def mT(self) -> "ndarray":
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return self.swapaxes(-1, -2)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of unsized object")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(self._shape[0]):
            yield self[i]

    def __hash__(self):
        raise TypeError("unhashable type: 'ndarray'")

    # --- observing values (barriers) --------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        host = host_laid_out(self)
        return host if dtype is None else host.astype(dtype, copy=False)

    def item(self, *args):
        return to_host(self).item(*args)

    def tolist(self):
        return to_host(self).tolist()

    def __float__(self):
        return float(self._scalar_host("float"))

    def __int__(self):
        return int(self._scalar_host("int"))

    def __complex__(self):
        return complex(self._scalar_host("complex"))

    def __index__(self):
        if self.ndim or self._dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(to_host(self))

    def __bool__(self):
        if self.size != 1:
            raise ValueError(
                "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()"
            )
        return bool(to_host(self).reshape(()))

    def _scalar_host(self, what):
        if self.ndim:
            # NumPy's own answer for this shape, asked of a stand-in of it: 2.4 refuses any
            # array of one or more dimensions, older versions took one element with a warning
            convert = {"float": float, "int": int, "complex": complex}[what]
            convert(np.zeros((1,) * self.ndim if self.size == 1 else (2,), self._dtype))
        return to_host(self).reshape(())

    def __repr__(self):
        return repr(to_host(self))

    def __str__(self):
        return str(to_host(self))

    def __format__(self, spec):
        return format(to_host(self), spec)

    def __reduce__(self):
        return (asarray, (to_host(self),))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    # --- views -------------------------------------------------------------------------

    def _standin(self) -> np.ndarray:
        """A NumPy array with this one's shape, strides and offset over memory
        nobody reads: NumPy answers view questions on it. One per layout, shared
        (nothing changes a stand-in: view questions make new arrays)."""
        key = (self._shape, self._estrides, self._offset)
        known = _STANDINS.get(key)
        if known is None:
            known = _make_standin(*key)
            if known.base.nbytes <= 1 << 24:  # bigger buffers are not kept (untouched, but address space)
                _STANDINS.put(key, known)
                _ADDRESS.put(id(known), (known, _address(known)))
        return known

    def _view(self, steps: tuple, standin: np.ndarray, origin: np.ndarray, writeable=None) -> "ndarray":
        if standin is origin:
            offset = self._offset
        else:
            known = _ADDRESS.get(id(origin))
            start = known[1] if known is not None and known[0] is origin else _address(origin)
            offset = _address(standin) - start + self._offset
        return _new(self._storage, self._steps + steps, standin.shape, self._dtype, standin.strides, offset,
                    self._writeable if writeable is None else writeable)

    def transpose(self, *axes) -> "ndarray":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        origin = self._standin()
        out = origin.transpose(axes or None)
        perm = tuple(range(self.ndim))[::-1] if not axes else tuple(a % self.ndim for a in axes)
        steps = (Permute(perm),) if perm != tuple(range(self.ndim)) else ()
        return self._view(steps, out, origin)

    def swapaxes(self, a: int, b: int) -> "ndarray":
        origin = self._standin()
        out = origin.swapaxes(a, b)
        perm = list(range(self.ndim))
        a, b = a % self.ndim, b % self.ndim
        perm[a], perm[b] = perm[b], perm[a]
        steps = (Permute(perm),) if a != b else ()
        return self._view(steps, out, origin)

    def _reshape(self, shape: tuple, copy=None) -> "ndarray":
        """:meth:`reshape` in C order to ``shape``, a tuple of sizes without
        ``-1`` whose product is the size: a view where NumPy's is one."""
        if copy is not True:
            origin = self._standin()
            try:
                out = origin.reshape(shape, copy=False)
            except ValueError:
                if copy is False:
                    raise
            else:
                steps = (Reshape(shape),) if shape != self._shape else ()
                return self._view(steps, out, origin)
        return wrap(core.apply("reshape", value(self), shape=shape), self._dtype)

    def ravel(self, order="C") -> "ndarray":
        return self.reshape(-1, order=order)

    def flatten(self, order="C") -> "ndarray":
        return self.reshape(-1, order=order, copy=True)

    def view(self, dtype=None, type=None):
        if dtype is not None and np.dtype(dtype) != self._dtype:
            raise NotImplementedError("lazycore.numpy: views that reinterpret the element type are not supported")
        return _new(self._storage, self._steps, self._shape, self._dtype, self._estrides, self._offset,
                    self._writeable)

    # ``reshape`` (other orders than C are NumPy's), indexing, the operators and
    # NumPy's protocols (``__array_ufunc__``, ``__array_function__``) are bound by
    # :mod:`.methods`: the modules they run build on this one.

    # --- protocols ------------------------------------------------------------------------

    def __array_namespace__(self, *, api_version=None):
        import lazycore.numpy as lnp

        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"unsupported Array API version {api_version!r}")
        return lnp

    # the frontend protocol (lazycore.trace.protocol)
    def __lazycore_value__(self):
        return value(self)

    @classmethod
    def __lazycore_wrap__(cls, handle):
        return wrap(handle)


_STANDINS = Memo("numpy.standins", 256)
"""(shape, element strides, offset) -> the stand-in for that layout."""
_ADDRESS = Memo("numpy.standin_addresses", 256)
"""id(stand-in) -> (stand-in, its data address): asking NumPy costs microseconds.
An entry outliving its stand-in is never wrong: a lookup checks the stand-in."""


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _make_standin(shape, estrides, offset) -> np.ndarray:
    hi = offset
    for n, s in zip(shape, estrides):
        if n == 0:  # no elements: any strides NumPy likes, at the buffer's start
            return np.ndarray(shape, np.int8, np.empty(1, np.int8))
        if s > 0:
            hi += (n - 1) * s
    # int8 elements: element strides are byte strides (np.ndarray checks the
    # view fits the buffer: the offset covers the negative strides' reach)
    return np.ndarray(shape, np.int8, np.empty(hi + 1, np.int8), offset, estrides)


def reshape_target(size: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` (sizes, at most one ``-1``) for an array of ``size`` elements,
    the ``-1`` worked out; NumPy's ValueError where none fits."""
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if any(s < -1 for s in shape):
        raise ValueError("negative dimensions not allowed")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {_shape_text(shape)}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    elif known != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {_shape_text(shape)}")
    return shape


def _shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# --- making arrays and reading/writing their values ----------------------------------------


def _new(storage, steps, shape, dtype, estrides, offset, writeable=True) -> ndarray:
    a = ndarray.__new__(ndarray)
    a._storage = storage
    a._steps = steps
    a._shape = tuple(shape)
    a._dtype = dtype
    a._estrides = tuple(estrides)
    a._offset = offset
    a._writeable = writeable
    a._cache = None
    return a


def wrap(handle, dtype=None) -> ndarray:
    """A new C-contiguous array owning ``handle`` (a fresh handle on its value:
    storages never share one)."""
    with _LOCK:  # no barrier between reading the value and holding it (it could donate what it reads)
        handle = core.LazyTensor(handle.value, handle.device)
    shape = tuple(handle.shape)
    dt = dtypes.TO_NUMPY[handle.dtype] if dtype is None else np.dtype(dtype)
    return new_array(handle, dt, shape, contiguous(shape))


def new_array(handle, dtype: np.dtype, shape: tuple, strides: tuple) -> ndarray:
    """A C-contiguous array owning ``handle``, a handle nobody else holds, of
    ``shape`` (a tuple) with ``strides == contiguous(shape)``: :func:`wrap`
    without its checks and copies, for callers that know all that."""
    a = ndarray.__new__(ndarray)
    a._storage = Storage(handle, strides)
    a._steps = ()
    a._shape = shape
    a._dtype = dtype
    a._estrides = strides
    a._offset = 0
    a._writeable = True
    a._cache = None
    return a


_CONTIGUOUS = Memo("numpy.contiguous_strides", 4096)


def contiguous(shape: tuple) -> tuple:
    """Row-major element strides of ``shape`` (kept per shape: made for every result)."""
    strides = _CONTIGUOUS.get(shape)
    if strides is None:
        strides = _CONTIGUOUS.put(shape, views.contiguous_strides(shape))
    return strides


def value(a: ndarray):
    """The lazycore handle for ``a``'s current value."""
    storage = a._storage
    if not a._steps:
        return storage.handle
    # A view read again while its storage is unchanged reuses the graph it
    # built (a stencil reads the same slices many times). Under the lock: a
    # barrier of another thread between the check and the new handle could
    # donate a buffer the cached graph reads (docs/threads.md).
    with _LOCK:
        base = storage.handle
        current = base._value
        cache = a._cache
        if cache is not None and cache[0] is current:
            return core.LazyTensor(cache[1], base.device)
        h = views.read(storage, a._steps)
        a._cache = (current, h._value)
        return h


def write(a: ndarray, new) -> None:
    """Make ``new`` the value of ``a`` in place (through views into the base)."""
    if not a._writeable:
        raise ValueError("assignment destination is read-only")
    refuse_write(a._storage)
    views.write(a._storage, a._steps, new)


def to_host(a: ndarray) -> np.ndarray:
    """The value as a row-major NumPy array (an implicit barrier)."""
    refuse_read()
    return core.to_numpy(value(a))


def host_laid_out(a: ndarray) -> np.ndarray:
    """The value as a NumPy array with ``a``'s strides, for NumPy to read: what
    ``ravel("K")`` reads, and which order ``tobytes(order="A")`` takes, follow
    them. The values go into a buffer spanning the view (not its base's memory);
    a sparse view of a much larger span, or one repeating elements (a broadcast: its
    host copy is the user's to write), is laid out densely in its memory order."""
    whole = _in_base(a)
    if whole is not None:
        return whole
    values = to_host(a)
    if a._standin().flags.c_contiguous or not a.size:
        return values
    low = sum((n - 1) * s for n, s in zip(a._shape, a._estrides) if s < 0)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(a._shape, a._estrides))
    if span > 4 * a.size + 4096 or any(n > 1 and not s for n, s in zip(a._shape, a._estrides)):
        out = np.empty_like(a._standin(), dtype=values.dtype, order="K")
    else:
        it = values.dtype.itemsize
        out = np.ndarray(a._shape, values.dtype, np.empty(span, values.dtype), -low * it, a.strides)
    out[...] = values
    return out


def _in_base(a: ndarray) -> np.ndarray | None:
    """A view of a base not much larger than it, as NumPy has it: ``a``'s
    elements in a host copy of the whole base, at ``a``'s offset and strides.
    Code that walks the base's memory around a view through the array NumPy
    gets (``as_strided`` with negative strides: SciPy's toeplitz, hankel and
    circulant) reads the base's values there, not memory outside a copy of the
    view. None for a whole array, a larger base (its copy would cost more than
    the view's), a base of another element type or laid out backwards, or a
    view repeating elements (a broadcast: the host copy is the user's to write)."""
    storage = a._storage
    if not a._steps or not a.size or any(n > 1 and not s for n, s in zip(a._shape, a._estrides)):
        return None
    base = storage.handle
    shape = tuple(base.shape)
    if (math.prod(shape) > 4 * a.size + 4096 or any(s < 0 for s in storage.strides)
            or dtypes.TO_NUMPY.get(base.dtype) != a._dtype):
        return None
    it = a.itemsize
    span = 1 + sum((n - 1) * s for n, s in zip(shape, storage.strides))
    memory = np.empty(span, a._dtype)
    np.ndarray(shape, a._dtype, memory, 0, tuple(s * it for s in storage.strides))[...] = core.to_numpy(base)
    return np.ndarray(a._shape, a._dtype, memory, a._offset * it, a.strides)


def laid_out(a: ndarray, order: str, proto=None) -> ndarray:
    """``a``, a row-major array of a value nobody else holds (a fresh result), with
    the strides NumPy gives an array made in ``order`` (``"A"`` and ``"K"``: after
    ``proto``, a NumPy array of ``a``'s shape, a stand-in or a host array)."""
    s = layouts.strides(a._shape, order, proto, a._estrides)
    if s is None:
        return a
    return _new(Storage(a._storage.handle, s), (), a._shape, a._dtype, s, 0, a._writeable)


def layout_of(a: ndarray, order: str):
    """What ``order`` "A" or "K" follows in ``a`` (its stand-in), or None where that is
    row-major: a row-major base array, the common case, asks NumPy nothing."""
    if order not in "AK" or not a._steps and a._estrides == contiguous(a._shape):
        return None
    return a._standin()


def fits_order(a: ndarray, order: str) -> bool:
    """Whether ``a`` is laid out as ``order`` asks (NumPy's test before a copy)."""
    if order in "AK":
        return True
    flags = a._standin().flags
    return flags.c_contiguous if order == "C" else flags.f_contiguous


def from_host(host: np.ndarray, dev=None) -> ndarray:
    """Upload a NumPy array as a new lazy array (to ``dev``; default: :func:`device`),
    in the host array's memory order (as NumPy's ``asarray`` keeps it)."""
    host = np.asarray(host)
    if not dtypes.supported(host.dtype):
        raise TypeError(f"lazycore.numpy has no element type for {host.dtype}")
    a = wrap(core.from_numpy(host, dev or device()), host.dtype)
    return a if host.flags.c_contiguous else laid_out(a, "K", host)


def asarray(obj, dtype=None, order=None, *, copy=None, device=None, like=None) -> ndarray:
    """``obj`` as a lazy array (uploading host data; lazy arrays pass through,
    copied where ``copy`` or ``order`` asks, as NumPy's)."""
    order = "K" if order is None else layouts.check(order)
    if isinstance(obj, ndarray):
        if type(obj) is not ndarray:  # a lazy scalar: NumPy's asarray gives a 0-d array
            obj, copy = wrap(value(obj), obj._dtype), False
        if dtype is not None and np.dtype(dtype) != obj.dtype:
            return obj.astype(dtype, order=order)
        if copy or not fits_order(obj, order):
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return obj.copy(order=order)
        return obj
    if isinstance(obj, (list, tuple)) and any(isinstance(v, ndarray) for v in _flat(obj)):
        stacked = _stack_nested(obj, dtype)
        if stacked is not None:
            return stacked if fits_order(stacked, order) else stacked.copy(order=order)
        obj = _materialize_nested(obj)
    host = np.asarray(obj, dtype=dtype, order=order)
    return from_host(host)


def _flat(obj):
    for v in obj:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _stack_nested(obj, dtype):
    """A nested list of lazy arrays (and host values) stacked on the device, as
    ``numpy.array`` builds it: every leaf's dtype as NumPy discovers it (a Python float
    is float64 here, not weak), promoted together unless ``dtype`` is given. None
    where the nesting is not a regular array (NumPy's error or object arrays: the
    host path) or a leaf is no number."""
    leaves = []

    def shape(v):
        if isinstance(v, (list, tuple)):
            inner = [shape(u) for u in v]
            if not inner or any(i is None or i != inner[0] for i in inner):
                return None
            return (len(v),) + inner[0]
        if isinstance(v, ndarray):
            leaves.append(v)
            return v.shape
        h = np.asarray(v)
        if h.dtype.kind not in "biufc":
            return None
        leaves.append(h)
        return h.shape

    if shape(obj) is None:
        return None
    want = np.dtype(dtype) if dtype is not None else np.result_type(*(v.dtype for v in leaves))
    if not dtypes.supported(want):
        return None

    def build(v):
        if isinstance(v, (list, tuple)):
            # through NumPy's protocol: manipulation (np.stack's lazy form) imports this module
            return np.stack([build(u) for u in v])
        if isinstance(v, ndarray):
            return v.astype(want) if v.dtype != want else wrap(value(v), v._dtype) if type(v) is not ndarray else v
        return from_host(np.asarray(v, dtype=want))

    out = build(obj)
    return out if out.dtype == want else out.astype(want)


def _materialize_nested(obj):
    if isinstance(obj, (list, tuple)):
        return [_materialize_nested(v) for v in obj]
    return to_host(obj) if isinstance(obj, ndarray) else obj
