"""Indexing: basic indexing makes views (as in NumPy); advanced indexing copies.

Basic keys (ints, slices, ``...``, ``None``) become view steps: a slice per
indexed dim (a reverse first for negative steps), then one reshape for the
dims ints drop and ``None`` adds. NumPy's stand-in checks the key and gives
the result's strides.

Advanced keys (integer arrays: lists, NumPy arrays or lazy arrays) are a
``lazy.gather`` and their assignment a ``lazy.scatter`` (see :class:`_Plan`).
The key is split in two: a basic view ``t`` of the array where every advanced
entry keeps its whole dim, then one gather over ``t``'s advanced dims. NumPy's
placement rule follows: the broadcast index shape takes the place of the
indexed dims when the advanced entries are adjacent in the key (an ``...`` or
``None`` between them separates them), else it goes first; integers count as
advanced entries once the key has an array.

Bounds: host index arrays are checked at the call (NumPy's ``IndexError``)
and their negative entries wrapped on the host. Lazy index arrays cannot be
checked without a barrier: negative entries wrap on the device, and an entry
outside ``-n..n-1`` is a value check (:mod:`lazycore.runtime.checks`): what
the op computed fails at its barrier with NumPy's ``IndexError`` (the
offending value left out), naming the op and the user's line. With
``settings.index_checks`` off it is clamped into range by ``gather`` and its
update dropped by ``scatter`` (XLA's semantics). Assignment with
duplicate indices stores one of the values (XLA does not promise which;
NumPy stores the last).

Boolean masks give data-dependent shapes. ``a[mask] = v`` with a ``v`` that
does not depend on how many elements the mask selects (a scalar, or
broadcastable along the selected dim) is a ``select`` on the device. A mask
that is a NumPy array (of one or more dims) is what NumPy defines it as, its
``nonzero()`` integer arrays, taken at the call: ``a[mask]`` is a gather and
``a[mask] = values`` a scatter. A lazy mask's read, or its write of one value
per selected element, reads the mask (a value read: its count is the result's
shape) and takes its coordinates on the host, the gather or scatter staying on
the device (a k-means loop's ``X[labels == k]`` moves the mask, not ``X``). The
coordinates' upload is marked dynamic along the count (:mod:`lazycore.runtime.buckets`):
counts in one bucket share a program where the padding rules prove it exact (a
gather and what reduces it), and compile as they are otherwise (a scatter). Its
coordinates on the device would need the count read first anyway, then a scan
or a sort, which on XLA's CPU costs 2-12x NumPy's whole round trip (measured at
1e3-1e6 elements).
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from lazycore.ir.config import settings
from lazycore.trace import core
from lazycore.trace.views import Reshape, Reverse, Slice

from .array import device, from_host, ndarray, to_host, value, wrap, write
from .fallback import call_numpy, implements
from .hostguard import refuse_read
from .scalars import as_scalar, result as numpy_result
from .ufuncs import apply, asarray_like, broadcast_to_shape, cast, const, device_of, shape_of, to_handle

__all__ = ["take", "take_along_axis", "put_along_axis", "nonzero", "argwhere", "flatnonzero", "ix_"]

_BASIC = (int, np.integer, slice, type(Ellipsis), type(None))
_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
              "arrays are valid indices")
_BAD_ARRAY = "arrays used as indices must be of integer (or boolean) type"


def _normalize(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def is_basic(key: tuple) -> bool:
    return all(isinstance(k, _BASIC) and not isinstance(k, (bool, np.bool_)) for k in key)


# --- basic indexing: views --------------------------------------------------------------------


def basic_view(a: ndarray, key: tuple) -> ndarray:
    origin = a._standin()
    probe = key if any(k is Ellipsis for k in key) else key + (Ellipsis,)
    out = origin[probe]  # NumPy's IndexError for bad keys, and the view's strides
    steps = []
    n_indexed = sum(1 for k in key if k is not None and k is not Ellipsis)
    d = 0
    for k in key:
        if k is None:
            continue
        if k is Ellipsis:
            d += a.ndim - n_indexed
            continue
        n = a.shape[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if step < 0:
                steps.append(Reverse((d,)))
                start, step = n - 1 - start, -step
            if not (start == 0 and step == 1 and count == n):
                steps.append(Slice(d, start, count, step))
        else:
            steps.append(Slice(d, int(k) % n, 1, 1))
        d += 1
    if out.shape != _sliced_shape(a.shape, steps):
        steps.append(Reshape(out.shape))
    return a._view(tuple(steps), out, origin)


def _sliced_shape(shape, steps):
    shape = list(shape)
    for s in steps:
        if isinstance(s, Slice):
            shape[s.dim] = s.count
    return tuple(shape)


# --- key entries ---------------------------------------------------------------------------------


class _Index:
    """An index array from a key: integer or boolean, on the host or lazy."""

    __slots__ = ("mask", "host", "lazy", "shape", "counted")

    def __init__(self, mask: bool, host=None, lazy=None, counted=False):
        # counted: a read mask's coordinates, whose count changes from call to call
        self.mask, self.host, self.lazy, self.counted = mask, host, lazy, counted
        self.shape = tuple((host if lazy is None else lazy).shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)


def _entry(k):
    """A key entry as an int, slice, ``None``, ``...`` or :class:`_Index`."""
    if k is None or k is Ellipsis or isinstance(k, slice):
        return k
    if isinstance(k, (bool, np.bool_)):
        return _Index(True, host=np.asarray(k))
    if isinstance(k, (int, np.integer)):
        return int(k)
    if isinstance(k, ndarray):
        if k.dtype.kind == "b":
            return _Index(True, lazy=k)
        if k.dtype.kind in "iu":
            return _Index(False, lazy=k)
        raise IndexError(_BAD_ARRAY)
    if not isinstance(k, (list, tuple, np.ndarray)) and hasattr(k, "__index__"):
        return operator.index(k)
    host = np.asarray(k)
    if isinstance(k, (list, tuple)) and host.size == 0 and host.dtype.kind == "f":
        host = host.astype(np.intp)  # NumPy reads an empty list as an empty integer index
    if host.dtype.kind == "b":
        return _Index(True, host=host)
    if host.dtype.kind not in "iu":
        raise IndexError(_BAD_ARRAY if host.ndim and host.dtype.kind in "fc" else _BAD_INDEX)
    if host.ndim == 0:
        return int(host)  # 0-d integer arrays index as integers (a view)
    return _Index(False, host=host)


def _consumes(e) -> int:
    if e is None or e is Ellipsis:
        return 0
    if isinstance(e, _Index) and e.mask:
        return e.ndim
    return 1


def _check_bounds(host: np.ndarray, n: int, axis: int) -> np.ndarray:
    """NumPy's IndexError for out-of-range entries; negative ones wrapped."""
    host = host.astype(np.int64, copy=False)
    if host.size:
        bad = (host < -n) | (host >= n)
        if bad.any():
            raise IndexError(f"index {host.flat[int(np.argmax(bad))]} is out of bounds for axis {axis} with size {n}")
        host = np.where(host < 0, host + n, host)
    return host


def _wrap_lazy(h, n: int):
    """i64 ``h`` with negative entries counted from the end of a size-``n`` dim."""
    h = cast(h, np.int64)
    neg = apply("compare", h, const(0, h), direction="LT")
    return apply("select", neg, apply("add", h, const(n, h)), h)


def _checked(h, n: int, axis: int, op: str):
    """i64 ``h``, checked as NumPy checks an index into a size-``n`` axis: an entry
    outside ``-n..n-1`` fails what is computed from the result at its barrier
    with NumPy's IndexError and the user's line (nothing with
    ``settings.index_checks`` off)."""
    if not settings.index_checks or not math.prod(h.shape):
        return h
    bad = apply("or", apply("compare", h, const(-n, h), direction="LT"), apply("compare", h, const(n, h), direction="GE"))
    # sum(f32(bad)) != 0: one kernel on XLA's CPU backend, the program returns the sum itself as
    # the flag, and a mesh adds no all-reduce for it (torch's indexing._any says why)
    top = apply("reduce_sum", core.apply("convert", bad, dtype="f32"), dims=tuple(range(len(h.shape))))
    failed = apply("compare", top, core.apply("constant", value=np.zeros((), np.float32), device=h.device),
                   direction="NE")
    return core.check(h, failed, f"{op}: index {{index}} is out of bounds for axis {axis} with size {n}",
                      error="IndexError")


def _coordinate(idx: _Index, n: int, axis: int, op: str = "ndarray.__getitem__"):
    """An integer index entry as an i64 handle of in-range (host) or wrapped (lazy) positions;
    ``op`` names the call in the error of a lazy entry out of range (None: in range already)."""
    if idx.lazy is not None:
        if n == 0 and math.prod(idx.shape):
            raise IndexError(f"index is out of bounds for axis {axis} with size 0")
        h = cast(value(idx.lazy), np.int64)
        return _wrap_lazy(h if op is None else _checked(h, n, axis, op), n)
    h = core.from_numpy(_check_bounds(idx.host, n, axis), device())
    if idx.counted and idx.shape[0] > 1:
        # the count is the gather's size: marked dynamic, the barrier pads it to a shape
        # bucket where the padding rules prove it exact (a k-means loop's ``X[labels == k]``
        # compiles once per bucket, not once per cluster size), else compiles it as it is
        core.dynamic(h, 0)
    return h


def _broadcast_index_shapes(shapes) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        text = " ".join(_shape_text(s) for s in shapes)
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together with shapes {text} ") from None


def _shape_text(shape) -> str:
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


# --- advanced indexing: the plan -------------------------------------------------------------------


class _Plan:
    """``a[key]`` as a basic view ``t`` and index arrays over some of ``t``'s dims.

    ``ints_advanced``: integers are index arrays (NumPy's rule once the key
    has an array); else they stay basic and drop their dim in ``t``.
    """

    def __init__(self, a: ndarray, entries: tuple, ints_advanced: bool = True):
        if sum(1 for e in entries if e is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        used = sum(_consumes(e) for e in entries)
        if used > a.ndim:
            raise IndexError(f"too many indices for array: array is {a.ndim}-dimensional, but {used} were indexed")
        fill = a.ndim - used  # dims the ``...`` (or the implicit trailing one) stands for
        bkey, self.adv, positions = [], [], []  # adv: (t dim, a dim, _Index)
        tdim = adim = 0
        for pos, e in enumerate(entries):
            if e is None:
                bkey.append(None)
                tdim += 1
            elif e is Ellipsis:
                bkey.append(Ellipsis)
                tdim += fill
                adim += fill
            elif isinstance(e, slice) or (isinstance(e, int) and not ints_advanced):
                bkey.append(e)
                tdim += not isinstance(e, int)
                adim += 1
            else:
                if isinstance(e, int):
                    e = _Index(False, host=np.asarray(e))
                k = e.ndim if e.mask else 1
                if e.mask:
                    got = a.shape[adim:adim + k]
                    for i, (n, m) in enumerate(zip(got, e.shape)):
                        if n != m:
                            raise IndexError(
                                f"boolean index did not match indexed array along axis {adim + i}; size of axis "
                                f"is {n} but size of corresponding boolean axis is {m}")
                bkey.extend([slice(None)] * k)
                self.adv.append((tdim, adim, e))
                positions.append(pos)
                tdim += k
                adim += k
        self.adjacent = positions == list(range(positions[0], positions[-1] + 1))
        self.t = basic_view(a, tuple(bkey))

    def gather_parts(self, op: str = "ndarray.__getitem__"):
        """(dims of ``t`` indexed, stacked i64 coordinates, batch shape B, result shape, offset dims)."""
        t = self.t
        dims = tuple(td for td, _, _ in self.adv)
        batch = _broadcast_index_shapes([e.shape for _, _, e in self.adv])
        coords = [_coordinate(e, t.shape[td], ad, op) for td, ad, e in self.adv]
        return _layout(t.shape, dims, coords, batch, self.adjacent)


def _layout(shape, dims, coords, batch, adjacent):
    """Dimension numbers for indexing dims ``dims`` of ``shape`` with ``coords`` (broadcast to ``batch``)."""
    rest = [d for d in range(len(shape)) if d not in dims]
    before = [d for d in rest if adjacent and d < dims[0]]
    after = [d for d in rest if d not in before]
    result = tuple(shape[d] for d in before) + batch + tuple(shape[d] for d in after)
    offset_dims = tuple(range(len(before))) + tuple(range(len(before) + len(batch), len(result)))
    stacked = None
    if math.prod(result):
        cols = [core.apply("reshape", broadcast_to_shape(c, batch), shape=batch + (1,)) for c in coords]
        stacked = cols[0]
        for c in cols[1:]:
            stacked = core.apply("concatenate", stacked, c, dim=len(batch))
    return dims, stacked, batch, result, offset_dims


def _gather(h, dims, stacked, batch, offset_dims):
    return core.apply(
        "gather", h, stacked,
        offset_dims=offset_dims, collapsed_slice_dims=dims, operand_batching_dims=(),
        start_indices_batching_dims=(), start_index_map=dims, index_vector_dim=len(batch),
        slice_sizes=tuple(1 if d in dims else n for d, n in enumerate(h.shape)), indices_are_sorted=False,
    )


def _scatter(h, dims, stacked, batch, offset_dims, updates):
    return core.apply(
        "scatter", h, stacked, updates,
        update_window_dims=offset_dims, inserted_window_dims=dims, input_batching_dims=(),
        scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=dims, index_vector_dim=len(batch),
        mode="replace",
    )


def _zeros(shape, dtype):
    c = core.apply("constant", value=np.zeros((), dtype), device=device())
    return broadcast_to_shape(c, tuple(shape))


# --- getitem / setitem ----------------------------------------------------------------------------------


def getitem(a: ndarray, key):
    key = _normalize(key)
    if is_basic(key):
        return _element_or_view(a, key)
    entries = tuple(_entry(k) for k in key)
    if is_basic(entries):
        return _element_or_view(a, entries)
    return advanced_getitem(a, entries)


def _element_or_view(a: ndarray, key: tuple) -> ndarray:
    """A view, or for an index naming one element (integers only, as ``a[0]`` of a
    1-d array), the element: NumPy gives a scalar, a copy, and so ``s = a[0];
    s += 1`` leaves ``a`` alone. Here it is a lazy scalar of its own storage."""
    view = basic_view(a, key)
    if view.ndim or any(k is Ellipsis for k in key):
        return view
    return as_scalar(wrap(value(view), a.dtype))


def _has_mask(entries) -> bool:
    return any(isinstance(e, _Index) and e.mask for e in entries)


def _masks_as_indices(a: ndarray, entries: tuple):
    """``entries`` with each mask replaced by its ``nonzero()`` integer arrays (NumPy's
    definition of a mask index): a lazy mask is read (its count decides the result's
    shape) and its coordinates taken on the host, the indexed array staying on the
    device; None for a 0-d mask (NumPy runs those)."""
    if any(isinstance(e, _Index) and e.mask and not e.ndim for e in entries):
        return None
    entries = tuple(_Index(True, host=_read_mask(e.lazy)) if isinstance(e, _Index) and e.mask and e.lazy is not None
                    else e for e in entries)
    _Plan(a, entries)  # NumPy's IndexError for a mask that does not fit the array
    out = []
    for e in entries:
        if isinstance(e, _Index) and e.mask:
            out.extend(_Index(False, host=c, counted=True) for c in np.nonzero(e.host))
        else:
            out.append(e)
    return tuple(out)


def _read_mask(a: ndarray) -> np.ndarray:
    """Which elements of lazy ``a`` are nonzero, computed on the device and read as a
    NumPy boolean array (a value read: its count is a data-dependent shape)."""
    refuse_read("a data-dependent shape")
    h = value(a)
    return core.to_numpy(h if h.dtype == "i1" else cast(h, np.bool_))


# --- nonzero: coordinates of a lazy array's nonzero elements -----------------------------------------
# What a lazy mask's read does (above): the mask is read and its coordinates are taken on
# the host; they come back as lazy int64 arrays, so what is indexed with them stays on the
# device (scikit-learn's roc_curve: ``xp.nonzero(xp.diff(y_score))[0]`` indexes a cumsum).


def _coordinates(c: np.ndarray, a: ndarray) -> ndarray:
    return from_host(c, device_of(a))


@implements(np.nonzero)
def nonzero(a):
    """NumPy's ``nonzero`` (and ``a.nonzero()``, ``where(cond)``): one int64 array of
    coordinates per dim; 0-d input is NumPy's ValueError."""
    a = asarray_like(a)
    if not a.ndim:
        np.nonzero(np.zeros((), a.dtype))  # NumPy's ValueError
    return tuple(_coordinates(c, a) for c in np.nonzero(_read_mask(a)))


@implements(np.argwhere)
def argwhere(a):
    """NumPy's ``argwhere``: the coordinates as rows, ``(count, a.ndim)`` (column-major, as NumPy lays it out)."""
    a = asarray_like(a)
    return _coordinates(np.argwhere(_read_mask(a)), a)


@implements(np.flatnonzero)
def flatnonzero(a):
    """NumPy's ``flatnonzero``: the nonzero positions of ``a.ravel()``."""
    a = asarray_like(a)
    return _coordinates(np.flatnonzero(_read_mask(a)), a)


def _dims(shape) -> str:
    """A shape as NumPy's indexing errors print it: ``(1,2,3)``, ``(5,)``."""
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _lone_scalar_mask(entries):
    """The value of a key that is one 0-d boolean (``a[cond]`` with a reduction's
    ``cond``: array-api-extra's ``apply_where`` and ``at``), read; None for other keys."""
    if len(entries) != 1 or not isinstance(entries[0], _Index) or not entries[0].mask or entries[0].ndim:
        return None
    e = entries[0]
    return bool(to_host(e.lazy) if e.lazy is not None else e.host)


def advanced_getitem(a: ndarray, entries: tuple):
    """Integer-array indexing: a gather (a copy); NumPy masks as their coordinates."""
    chosen = _lone_scalar_mask(entries)
    if chosen is not None:  # NumPy: a new leading dim of length 1 (True) or 0 (False), a copy
        return (a[None] if chosen else a[None][:0]).copy()
    if _has_mask(entries):
        coords = _masks_as_indices(a, entries)
        if coords is None:
            return call_numpy(_getitem, (a, _raw_key(entries)), {}, name="ndarray.__getitem__")
        entries = coords
    plan = _Plan(a, entries)
    dims, stacked, batch, result, offset_dims = plan.gather_parts()
    if stacked is None:
        return wrap(_zeros(result, a.dtype), a.dtype)
    return numpy_result(wrap(_gather(value(plan.t), dims, stacked, batch, offset_dims), a.dtype))


def _raw_key(entries):
    return tuple((e.host if e.lazy is None else e.lazy) if isinstance(e, _Index) else e for e in entries)


def _getitem(a, key):
    return a[key]


def setitem(a: ndarray, key, val) -> None:
    key = _normalize(key)
    if not a._writeable:
        raise ValueError("assignment destination is read-only")
    if not is_basic(key):
        key = tuple(_entry(k) for k in key)
    if is_basic(key):
        target = basic_view(a, key)
        write(target, _broadcast_value(val, target))
        return
    advanced_setitem(a, key, val)


def _fit_value(val, dtype, shape, what="indexing result", dev=None):
    """``val`` cast (unsafely, as NumPy assignment does) and broadcast to
    ``shape``, host data on ``dev`` (the target's device).

    Like NumPy, extra leading dims of size 1 are dropped first."""
    vshape = tuple(shape_of(val))
    extra = len(vshape) - len(shape)
    trimmed = vshape[extra:] if extra > 0 and all(n == 1 for n in vshape[:extra]) else vshape
    try:
        ok = np.broadcast_shapes(trimmed, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"shape mismatch: value array of shape {_shape_text(vshape)} could not be broadcast to "
                         f"{what} of shape {_shape_text(shape)}")
    h = to_handle(val, dtype, dev)
    if trimmed != vshape:
        h = core.apply("reshape", h, shape=trimmed)
    return broadcast_to_shape(h, tuple(shape))


def _broadcast_value(val, target: ndarray):
    try:
        return _fit_value(val, target.dtype, target.shape, dev=device_of(target))
    except ValueError:
        raise ValueError(f"could not broadcast input array from shape {tuple(shape_of(val))} into shape "
                         f"{target.shape}") from None


def advanced_setitem(a: ndarray, entries: tuple, val) -> None:
    masks = [e for e in entries if isinstance(e, _Index) and e.mask]
    if masks:
        arrays = [e for e in entries if isinstance(e, _Index) and not e.mask]
        # a 0-d mask (array-api-extra's at(r, r_is_bad).set(nan) on a reduction's result)
        # selects all or nothing: a select too, but for NumPy's one-boolean-index rule that
        # the value have at most one dimension (its TypeError: NumPy's own, through it)
        if (len(masks) == 1 and not arrays and (masks[0].ndim or len(shape_of(val)) <= 1)
                and _masked_assign(a, entries, val)):
            return
        # a 0-d mask and one value per selected element (none or one): the mask is read
        # (a 0-d ``a`` and a value of more dims: NumPy's TypeError, through it)
        chosen = None if not a.ndim and len(shape_of(val)) > 1 else _lone_scalar_mask(entries)
        if chosen is not None:  # ``val`` fits (1,) + a.shape or (0,) + a.shape
            target = ((1,) if chosen else (0,)) + a.shape
            try:
                np.broadcast_shapes(tuple(shape_of(val)), target)
            except ValueError:
                raise ValueError(f"shape mismatch: value array of shape {_dims(tuple(shape_of(val)))} could not be "
                                 f"broadcast to indexing result of shape {_dims(target)}") from None
            if chosen:
                a[None] = val
            return
        coords = _masks_as_indices(a, entries)
        if coords is None:
            call_numpy(_setitem, (a, _raw_key(entries), val), {}, name="ndarray.__setitem__")
            return
        entries = coords
    plan = _Plan(a, entries)
    dims, stacked, batch, result, offset_dims = plan.gather_parts("ndarray.__setitem__")
    updates = _fit_value(val, a.dtype, result, dev=device_of(a))
    if stacked is None:
        return
    t = plan.t
    write(t, _scatter(value(t), dims, stacked, batch, offset_dims, updates))


def _masked_assign(a: ndarray, entries: tuple, val) -> bool:
    """``a[..., mask, ...] = val`` as a select, when ``val`` does not depend on the
    number of selected elements; False to leave it to NumPy."""
    plan = _Plan(a, entries, ints_advanced=False)
    t = plan.t
    (p, _, mask), = plan.adv
    k = mask.ndim
    others = [d for d in range(t.ndim) if not p <= d < p + k]
    # the selection's shape, with its count dim (at q) as 1; ints are advanced entries
    # too here, so they decide with the mask whether the selection stays in place
    adv = [i for i, e in enumerate(entries) if isinstance(e, (int, _Index))]
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    q = sum(1 for d in others if d < p) if adjacent else 0
    rest = [t.shape[d] for d in others]
    sel = tuple(rest[:q]) + (1,) + tuple(rest[q:])
    vshape = tuple(shape_of(val))
    j = len(vshape) - (len(sel) - q)
    if j >= 0 and vshape[j] != 1:
        return False  # one value per selected element: the count is data-dependent
    try:
        h = _fit_value(val, a.dtype, sel, dev=device_of(a))
    except ValueError:
        return False  # NumPy raises its own error
    if not t.size:
        return True
    h = core.apply("reshape", h, shape=tuple(rest))
    full = core.apply("broadcast_in_dim", h, dims=tuple(others), shape=t.shape)
    m = value(mask.lazy) if mask.lazy is not None else core.from_numpy(mask.host, device())
    m = core.apply("broadcast_in_dim", m, dims=tuple(range(p, p + k)), shape=t.shape)
    write(t, core.apply("select", m, full, value(t)))
    return True


def _setitem(a, key, val):
    a[key] = val


# --- take / take_along_axis / put_along_axis -----------------------------------------------------------------


def _index_input(indices, casting_ok=True) -> _Index:
    """``take``'s indices (``casting_ok``: NumPy casts them to ``intp``, an array
    with ``same_kind`` casting: booleans count as 0 and 1, floats raise
    ``TypeError``; a list of numbers any way), else ``take_along_axis``'s
    and ``put_along_axis``'s (an integer array)."""
    if isinstance(indices, ndarray):
        kind = indices.dtype.kind
        if kind in "iu":
            return _Index(False, lazy=indices)
        if not casting_ok:
            raise IndexError("`indices` must be an integer array")
        if kind != "b":
            raise TypeError(f"Cannot cast array data from {indices.dtype!r} to dtype('int64') according to the "
                            f"rule 'same_kind'")
        return _Index(False, lazy=indices.astype(np.int64))
    host = np.asarray(indices)
    if host.dtype.kind not in "iu":
        if not casting_ok:
            raise IndexError("`indices` must be an integer array")
        if isinstance(indices, np.ndarray) and host.dtype.kind != "b":
            raise TypeError(f"Cannot cast array data from {host.dtype!r} to dtype('int64') according to the "
                            f"rule 'same_kind'")
        if host.dtype.kind not in "fb":
            raise IndexError("arrays used as indices must be of integer type")
        host = host.astype(np.intp)
    return _Index(False, host=host)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    a = asarray_like(a)
    if axis is None:
        a, axis = a.ravel(), 0
    axis = normalize_axis_index(axis, a.ndim)
    n = a.shape[axis]
    idx = _index_input(indices)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    if mode != "raise" and n == 0 and math.prod(idx.shape):
        raise IndexError("cannot do a non-empty take from an empty axes.")
    if idx.lazy is not None:
        h = cast(value(idx.lazy), np.int64)
        if mode == "wrap" and n:
            r = apply("rem", h, const(n, h))
            h = apply("select", apply("compare", r, const(0, h), direction="LT"), apply("add", r, const(n, h)), r)
        elif mode == "clip" and n:
            h = apply("minimum", apply("maximum", h, const(0, h)), const(n - 1, h))
        idx = _Index(False, lazy=wrap(h, np.int64))
    elif mode == "wrap" and n:
        idx = _Index(False, host=np.mod(idx.host, n))
    elif mode == "clip" and n:
        idx = _Index(False, host=np.clip(idx.host, 0, n - 1))
    dims, stacked, batch, result, offset_dims = _layout(
        a.shape, (axis,), [_coordinate(idx, n, axis, "take" if mode == "raise" else None)], idx.shape, True)
    h = _zeros(result, a.dtype) if stacked is None else _gather(value(a), dims, stacked, batch, offset_dims)
    res = wrap(h, a.dtype)
    if out is None:
        return numpy_result(res)
    if not isinstance(out, ndarray) or out.shape != res.shape:
        raise ValueError("output array does not match result of ndarray.take")
    write(out, cast(h, out.dtype))
    return out


def _along_axis(arr, indices, axis):
    """Common checks of take/put_along_axis: (arr, index, axis, shape of the indexed result).

    NumPy builds the fancy index ``arange``s x ``indices``: they broadcast
    in every dim but ``axis``."""
    idx = _index_input(indices, casting_ok=False)
    if axis is None:
        if idx.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        arr, axis = arr.ravel(), 0
    if idx.ndim != arr.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    axis = normalize_axis_index(axis, arr.ndim)
    spread = tuple(1 if d == axis else n for d, n in enumerate(arr.shape))
    return arr, idx, axis, _broadcast_index_shapes([spread, idx.shape])


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    arr, idx, axis, shape = _along_axis(asarray_like(arr), indices, axis)
    n = arr.shape[axis]
    coord = _coordinate(idx, n, axis, "take_along_axis")
    if not math.prod(shape):
        return wrap(_zeros(shape, arr.dtype), arr.dtype)
    rank = arr.ndim
    src = broadcast_to_shape(value(arr), tuple(n if d == axis else s for d, s in enumerate(shape)))
    others = tuple(d for d in range(rank) if d != axis)
    g = core.apply(
        "gather", src, broadcast_to_shape(coord, shape),
        offset_dims=(), collapsed_slice_dims=(axis,), operand_batching_dims=others,
        start_indices_batching_dims=others, start_index_map=(axis,), index_vector_dim=rank,
        slice_sizes=(1,) * rank, indices_are_sorted=False,
    )
    return wrap(g, arr.dtype)


@implements(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    if not isinstance(arr, ndarray):
        return call_numpy(np.put_along_axis, (arr, indices, values, axis), {})
    if not arr._writeable:
        raise ValueError("assignment destination is read-only")
    target = arr
    base, idx, axis, shape = _along_axis(arr, indices, axis)
    if any(s != n for d, (s, n) in enumerate(zip(shape, base.shape)) if d != axis):
        # an index broadcast over a size-1 dim of arr writes one place many times: NumPy decides
        return call_numpy(np.put_along_axis, (arr, indices, values, axis), {})
    n = base.shape[axis]
    coord = _coordinate(idx, n, axis, "put_along_axis")
    updates = _fit_value(values, base.dtype, shape)
    if not math.prod(shape):
        return None
    rank = base.ndim
    others = tuple(d for d in range(rank) if d != axis)
    new = core.apply(
        "scatter", value(base), broadcast_to_shape(coord, shape), updates,
        update_window_dims=(), inserted_window_dims=(axis,), input_batching_dims=others,
        scatter_indices_batching_dims=others, scatter_dims_to_operand_dims=(axis,), index_vector_dim=rank,
        mode="replace",
    )
    if base is not target:  # axis=None worked on a flattened copy or view
        new = core.apply("reshape", new, shape=target.shape)
    write(target, new)
    return None


@implements(np.ix_)
def ix_(*args):
    """NumPy's open mesh of 1-d index arrays (``A[np.ix_(rows, cols)]``): each argument
    reshaped to broadcast along its own dim, a boolean one first made its ``nonzero``
    positions (a mask read, as ``nonzero``'s). Lists and host arrays come back lazy."""
    out = []
    nd = len(args)
    dev = device_of(*args)
    for k, new in enumerate(args):
        if not isinstance(new, ndarray):
            new = np.asarray(new)
            if new.size == 0:
                new = new.astype(np.intp)
        if new.ndim != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if new.dtype == np.bool_:
            (new,) = nonzero(new) if isinstance(new, ndarray) else new.nonzero()
        if not isinstance(new, ndarray):
            new = from_host(new, dev)
        out.append(new.reshape((1,) * k + (new.size,) + (1,) * (nd - k - 1)))
    return tuple(out)
