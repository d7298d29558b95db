"""Reads answered on the host: uploaded data's copies, and exact functions of them.

A small integer, boolean, float32 or float64 upload
(:func:`lazycore.runtime.transfer.from_numpy`, at most :data:`KEPT_BYTES`)
keeps its host copy on its device data leaf (``Data.host``). A read of such a
leaf copies nothing from the device, and a read of a pending value made of
such leaves (one at least), constants and Python numbers by the ops of
:data:`_EVAL` is computed here with NumPy (:func:`evaluate`): no program, no
device read. Real code reads such values in every training step:
transformers' ``labels.max() >= vocab_size``, the CTC targets' mask and
lengths, pack_padded_sequence's inverse order (``unsorted_indices.cpu()``),
torchvision's detection models' check for degenerate target boxes
(``boxes[:, 2:] <= boxes[:, :2]`` of the resized boxes).

The answer must be the bits the device would compute. Integer and boolean
ops are the dialect's own semantics (:mod:`lazycore.dialect.folds`: wrapping
arithmetic, truncating division), data movement is exact, and float work is
taken only where no rounding can differ: compares, selects, negation, order
and movement of values with no subnormal (XLA's CPU backend flushes them),
sums of whole numbers no larger than the type's mantissa holds exactly (a
count of a mask made float), and additions, subtractions, products and
quotients of finite numbers whose exact result the type holds (no rounding at
all, so no order, fusion or contraction of the device's can change it; a box
scaled by ``64 / 64``). A float result that would round is refused. Anything else, a leaf without
a host copy (a parameter, a program's result), a failed value check, an
index out of range, a tie XLA breaks its own way, is refused (None), and the
read goes on as before (:mod:`lazycore.runtime.reads`). The decision is made
at the read, by a walk of at most :data:`_LOOKED_AT` nodes that stops at the
first op it cannot take; nothing happens on the per-op path.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import spec_of
from lazycore.dialect.types import is_bool, is_int, to_numpy_dtype
from lazycore.ir.failure import Failure
from lazycore.ir.graph import Data, Node, Scalar, operand_values

KEPT_BYTES = 64 * 1024
"""The largest upload whose host copy is kept, and the largest value a read
computes here: the labels, lengths, masks, orders and target boxes real code reads are a
few bytes a position."""

_WORK_BYTES = 1 << 20
"""The largest intermediate value computed here (an all-ones mask broadcast
over a batch before it is summed)."""

_LOOKED_AT = 256
"""Nodes a read computes here, at most."""

_POSITIONS = 4096
"""Index vectors a gather or scatter computed here takes, at most (one
Python step each)."""

_FLOATS = ("f32", "f64")
_MANTISSA = {"f32": 24, "f64": 53}


class _Refused(Exception):
    """The value is not computed here."""


_KEPT_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def keep(host: np.ndarray) -> np.ndarray | None:
    """A read-only copy of ``host`` to keep on its upload's leaf, or None when
    it is larger than :data:`KEPT_BYTES` or of another kind than integers,
    booleans, float32 and float64 (the types the rules here take)."""
    if host.nbytes > KEPT_BYTES or not (host.dtype.kind in "biu" or host.dtype in _KEPT_FLOATS):
        return None
    copy = np.array(host, copy=True, order="C")
    copy.flags.writeable = False
    return copy


def keep_number(leaf, was) -> None:
    """Device data ``leaf`` that replaced a handle's value that ``was`` an
    integer or boolean scalar parameter keeps that number as its host copy. A
    module's 0-d int buffer (transformers' Encodec keeps each convolution's
    stride, kernel size and padding so) is such a parameter until a barrier's
    program returns it, or a read of it (``int(buffer)``) answers it, as device
    data; functions of it read later (Encodec's padding, every call) are then
    still computed on the host instead of each running a program."""
    node = was[0]
    if type(node) is Scalar and type(leaf) is Data and leaf.sharding is None and leaf.row is None:
        t = node.types[0]
        if is_int(t.dtype) or is_bool(t.dtype):
            leaf.host = keep(np.asarray(node.value, dtype=to_numpy_dtype(t.dtype)))


def evaluate(value, known: dict | None = None, floats: bool = True,
             alone: bool = False) -> tuple[np.ndarray, int] | None:
    """The value of ``value`` (a graph :class:`~lazycore.ir.graph.Value`)
    computed on the host from host copies and constants, with the bits the
    device would compute, and the number of nodes computed; None where that
    is not certain (see the module's text). ``known``: ``id(node)`` -> the
    host value of pending nodes computed by a program and read already
    (:func:`inputs`' ``compute``). ``floats``: False refuses float host
    copies (a float upload's value is then the device's to compute) and
    takes float sums and products of whole numbers only (as before float
    uploads kept copies). ``alone``: an integer or boolean value of
    constants alone is computed too (see :func:`lazycore.runtime.reads._read_on_host`)."""
    t = value[0].types[value[1]]
    if t.size * to_numpy_dtype(t.dtype).itemsize > KEPT_BYTES:
        return None
    run = _Evaluation(floats)
    if known:
        run.memo.update(known)
        run.copies += len(known)
    try:
        with np.errstate(all="ignore"):  # (integers wrap, as the device's do)
            out = run.value(value)
    except _Refused:
        return None
    except Exception:  # noqa: BLE001  (a case the rules here do not take: the device's read answers it)
        return None
    if not (run.copies or (alone and (is_int(t.dtype) or is_bool(t.dtype)))) \
            or out.shape != t.shape or out.dtype != to_numpy_dtype(t.dtype):
        return None  # (a value of constants alone, unless ``alone``: lazycore.runtime.reads computes it on the device)
    return out, run.count


_ROUNDED = frozenset(("add", "sub", "mul", "div", "reduce_sum", "vector_sum", "column_sum", "reduce_prod", "scatter"))
"""Ops whose float results :func:`inputs` does not plan on: whether they are
exact is known from the values only, after the reads."""


def _small(t) -> bool:
    return ((is_int(t.dtype) or is_bool(t.dtype) or t.dtype in _FLOATS)
            and t.size * to_numpy_dtype(t.dtype).itemsize <= KEPT_BYTES)


def plain_leaf(node) -> bool:
    """A device data leaf of one device, whole, not failed, not marked: its
    buffer is the value (a read of it is a copy of the buffer; a padded
    result's is its padded value, which the slice over it cuts)."""
    return (type(node) is Data and node.row is None and node.sharding is None
            and not node.dynamic and type(node.storage) is not Failure)


def inputs(value, bases: dict) -> tuple[list, list] | None:
    """What ``value`` needs so that :func:`evaluate` can compute it: the
    small device data leaves without a host copy to copy from the device
    (``fetch``), and the pending nodes of ``bases`` (``id(node)`` -> node:
    live handles' small pending values) to compute by a program and copy
    (``compute``); None where its graph has an op taken here on no such
    inputs. The plan goes down to leaves where it can (a copy costs no
    program) and stops at the base nearest the read where it cannot (a
    second read of another function of that base is then computed here);
    float arithmetic, whose
    exactness shows in the values only, is not planned on (a copy that
    ends in a refusal would be wasted). Structural: :func:`evaluate` may
    still refuse (a subnormal, a NaN in an order, an index out of range)."""
    memo: dict[int, tuple | None] = {}
    count = [0]

    def plan(node, root: bool):
        got = memo.get(id(node), False)
        if got is not False:
            return got
        count[0] += 1
        out = None
        if count[0] <= _LOOKED_AT and len(node.types) == 1:
            kind = type(node)
            if kind is Scalar:
                out = ((), ())
            elif kind is Data:
                if node.host is not None and node.row is None:
                    out = ((), ())
                elif plain_leaf(node) and node.owned and _small(node.types[0]):
                    out = ((node,), ())  # (not a buffer the user handed in or out: it may change under us)
            elif kind is Node:
                t = node.types[0]
                if (node.op in _EVAL and _small(t)
                        and not (node.op in _ROUNDED and t.dtype in _FLOATS)):
                    parts = [plan(v[0], False) if v[1] == 0 else None for v in operand_values(node)]
                    if all(p is not None for p in parts):
                        out = (tuple(x for p in parts for x in p[0]), tuple(x for p in parts for x in p[1]))
                if (out is None or out[1]) and not root and id(node) in bases:
                    out = ((), (node,))  # the base nearest the read: later reads of it are computed here too
        memo[id(node)] = out
        return out

    got = plan(value[0], True) if value[1] == 0 else None
    if got is None:
        return None
    fetch = list({id(n): n for n in got[0]}.values())
    compute = list({id(n): n for n in got[1]}.values())
    return fetch, compute


class _Evaluation:
    __slots__ = ("memo", "count", "copies", "floats")

    def __init__(self, floats: bool = True):
        self.floats = floats
        self.memo: dict[int, np.ndarray] = {}
        self.count = 0
        self.copies = 0  # host copies met

    def value(self, v) -> np.ndarray:
        node, index = v[0], v[1]
        got = self.memo.get(id(node))
        if got is not None:
            return got
        self.count += 1
        if self.count > _LOOKED_AT or index != 0 or len(node.types) != 1:
            raise _Refused
        t = node.types[0]
        if t.size * to_numpy_dtype(t.dtype).itemsize > _WORK_BYTES:
            raise _Refused
        kind = type(node)
        if kind is Data:
            if node.host is None or node.row is not None:  # (a padded result's: its padded value)
                raise _Refused
            out = node.host
            if not self.floats and out.dtype.kind == "f":
                raise _Refused
            self.copies += 1
        elif kind is Scalar:
            out = np.asarray(node.value, dtype=to_numpy_dtype(t.dtype))
        elif kind is Node:
            rule = _EVAL.get(node.op)
            if rule is None or not (is_int(t.dtype) or is_bool(t.dtype) or t.dtype in _FLOATS):
                raise _Refused
            args = [self.value(o) for o in operand_values(node)]
            if not self.floats and rule is _arith and (t.dtype in _FLOATS or any(a.dtype.kind == "f" for a in args)):
                rule = _whole_arith  # (off mid-step: sums and products of whole numbers only, as before)
            out = rule(node, t, args)
            if out is None:
                raise _Refused
            out = np.asarray(out)
            if out.dtype != to_numpy_dtype(t.dtype):
                out = out.astype(to_numpy_dtype(t.dtype))
            if out.shape != t.shape:
                raise _Refused
        else:
            raise _Refused
        if out.dtype.kind == "f":
            _plain(out)
        self.memo[id(node)] = out
        return out


# --- what the device computes, where the host computes the same bits ------------------------


def _plain(a: np.ndarray) -> None:
    """Refuse float values the CPU backend may treat otherwise: subnormals (flushed)."""
    mag = np.abs(a[np.isfinite(a)])
    if np.any((mag > 0) & (mag < np.finfo(a.dtype).tiny)):
        raise _Refused


def _whole(t, *arrays) -> None:
    """Float sums and products are taken only of finite whole numbers that
    the type holds exactly, so no order of XLA's rounds."""
    if t.dtype not in _FLOATS:
        return
    bound = 2.0 ** _MANTISSA[t.dtype]
    for a in arrays:
        if a.dtype.kind != "f":
            continue
        if not np.all(np.isfinite(a)) or np.any(np.floor(a) != a) or np.sum(np.abs(a), dtype=np.float64) >= bound:
            raise _Refused


def _no_nan(*arrays) -> None:
    for a in arrays:
        if a.dtype.kind == "f" and np.any(np.isnan(a)):
            raise _Refused


def _fold(node, t, args, kwargs=None):
    spec = spec_of(node.op)
    kw = dict(node.attrs)
    for p in spec.result_params:
        kw[p] = getattr(t, p)
    return spec.fold(*args, **kw)


def _int_only(node, t, args):
    """An elementwise op of integers and booleans: the dialect's fold."""
    if t.dtype in _FLOATS or any(a.dtype.kind == "f" for a in args):
        raise _Refused
    return _fold(node, t, args)


def _exact(node, t, args):
    """An elementwise op no float rounding touches (compare, select, neg, abs, ceil, floor, round)."""
    return _fold(node, t, args)


def _ordered(node, t, args):
    """maximum/minimum: NaN handling is the backend's, and so is the order of
    -0.0 and +0.0 met at one position."""
    _no_nan(*args)
    if t.dtype in _FLOATS and len(args) == 2:
        a, b = np.broadcast_arrays(*args)
        if np.any((a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))):
            raise _Refused
    return _fold(node, t, args)


_SPLIT = {"f32": 4097.0, "f64": 134217729.0}  # 2**(p - p//2) + 1: Veltkamp's split of a p-bit mantissa
_RANGE = {"f32": (2.0 ** -40, 2.0 ** 40), "f64": (2.0 ** -450, 2.0 ** 450)}
"""Magnitudes the exact product test takes (nonzero operands and results):
no partial product overflows, and the last bit of an exact product is a
normal number, so an error term never underflows to a false zero."""


def _two_product_error(a, b, t):
    """The rounding error of ``a * b`` in ``a``'s type (Dekker's product:
    exact where the magnitudes are within :data:`_RANGE`)."""
    p = a * b
    c = _SPLIT[t.dtype]
    a_hi = a * c - (a * c - a)
    a_lo = a - a_hi
    b_hi = b * c - (b * c - b)
    b_lo = b - b_hi
    return ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _in_range(t, *arrays) -> None:
    low, high = _RANGE[t.dtype]
    for x in arrays:
        mag = np.abs(x[x != 0])
        if np.any(mag < low) or np.any(mag > high):
            raise _Refused


def _exact_float(op: str, t, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Refuse unless ``out``, the type's result of ``a op b``, is the exact
    result: finite operands and result, no -0.0 (``x + 0`` simplified to
    ``x`` keeps a sign IEEE's sum drops), and no rounding (TwoSum's error of
    the sum is zero; the product's error is zero; the quotient times the
    divisor is exactly the dividend)."""
    dtype = to_numpy_dtype(t.dtype)
    if a.dtype != dtype or b.dtype != dtype:
        raise _Refused
    a, b = np.broadcast_arrays(a, b)
    for x in (a, b, out):
        if not np.all(np.isfinite(x)) or np.any((x == 0) & np.signbit(x)):
            raise _Refused
    if op in ("add", "sub"):
        y = b if op == "add" else -b
        s = a + y  # (the fold's own result, recomputed in the same type)
        bb = s - a
        err = (a - (s - bb)) + (y - bb)  # TwoSum: exact for finite values
        if not np.array_equal(s, out) or np.any(err != 0):
            raise _Refused
    elif op == "mul":
        _in_range(t, a, b, out)
        if not np.array_equal(a * b, out) or np.any(_two_product_error(a, b, t) != 0):
            raise _Refused
    else:  # div: out * b == a exactly, b nonzero
        if np.any(b == 0):
            raise _Refused
        _in_range(t, a, b, out)
        if not np.array_equal(out * b, a) or np.any(_two_product_error(out, b, t) != 0):
            raise _Refused


def _whole_arith(node, t, args):
    """add/sub/mul of floats that are whole numbers the type holds exactly
    (a count of a mask made float), with :func:`evaluate`'s ``floats`` off."""
    if node.op == "div":
        raise _Refused
    _whole(t, *args)
    out = _fold(node, t, args)
    _whole(t, np.asarray(out))
    return out


def _arith(node, t, args):
    """add/sub/mul/div: integers as the fold computes (wrapping; truncating
    division); floats only where the result is exact (:func:`_exact_float`)."""
    if t.dtype not in _FLOATS and not any(a.dtype.kind == "f" for a in args):
        return _fold(node, t, args)
    if t.dtype not in _FLOATS or len(args) != 2:
        raise _Refused
    out = np.asarray(_fold(node, t, args))
    _exact_float(node.op, t, args[0], args[1], out)
    return out


def _convert(node, t, args):
    (x,) = args
    out = _fold(node, t, args)
    if out is None:
        return None
    target = to_numpy_dtype(t.dtype)
    if target.kind == "f" or x.dtype.kind == "f":
        # the value must survive the conversion unchanged (ints to floats
        # within the mantissa, f32 -> f64); a float -> int conversion
        # truncates, as the fold does (range checked there)
        with np.errstate(invalid="ignore", over="ignore"):
            back = out.astype(x.dtype)
        if target.kind == "f" and not np.array_equal(back, x, equal_nan=x.dtype.kind == "f"):
            raise _Refused
    return out


def _bitcast(node, t, args):
    (x,) = args
    if x.dtype.itemsize != to_numpy_dtype(t.dtype).itemsize:
        raise _Refused  # a change of rank: not taken here
    return _fold(node, t, args)


def _constant(node, t, args):
    return np.broadcast_to(np.asarray(node.attrs["value"]).astype(to_numpy_dtype(t.dtype)), t.shape)


def _iota(node, t, args):
    dim = node.attrs["dim"]
    line = np.arange(t.shape[dim], dtype=to_numpy_dtype(t.dtype))
    shape = [1] * len(t.shape)
    shape[dim] = t.shape[dim]
    return np.broadcast_to(line.reshape(shape), t.shape)


def _broadcast_in_dim(node, t, args):
    (x,) = args
    dims = tuple(node.attrs["dims"])
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order)
    shape = [1] * len(t.shape)
    for i in order:
        shape[dims[i]] = x.shape[order.index(i)]
    return np.broadcast_to(x.reshape(shape), t.shape)


def _reshape(node, t, args):
    return np.reshape(args[0], t.shape)


def _permute(node, t, args):
    return np.transpose(args[0], node.attrs["dims"])


def _slice(node, t, args):
    a = node.attrs
    return args[0][tuple(slice(s, e, k) for s, e, k in zip(a["start"], a["limit"], a["strides"]))]


def _concatenate(node, t, args):
    return np.concatenate(args, axis=node.attrs["dim"])


def _reverse(node, t, args):
    return np.flip(args[0], tuple(node.attrs["dims"])) if node.attrs["dims"] else args[0]


def _pad(node, t, args):
    x, fill = args
    a = node.attrs
    if any(i < 0 for i in a["interior"]):
        raise _Refused
    # interior padding, then the edges (negative ones cut)
    spread = [n + max(n - 1, 0) * i for n, i in zip(x.shape, a["interior"])]
    out = np.full(spread, fill, dtype=x.dtype)
    out[tuple(slice(None, None, i + 1) for i in a["interior"])] = x
    cut = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for lo, hi, n in zip(a["low"], a["high"], spread))
    out = out[cut]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in zip(a["low"], a["high"])]
    return np.pad(out, widths, constant_values=fill)


def _reduce(numpy_reduce, float_rule):
    def rule(node, t, args):
        (x,) = args
        dims = tuple(node.attrs["dims"])
        if x.dtype.kind == "f":
            float_rule(t, x)
        if not dims:  # a sum over no dims still starts from zero (NumPy's: -0 gives +0)
            return x + x.dtype.type(0) if numpy_reduce is np.sum and x.dtype.kind == "f" else x
        if x.size == 0:
            raise _Refused  # the identity: the backend's (infinities, extremes)
        if x.dtype == np.bool_ and numpy_reduce in (np.sum, np.prod):
            raise _Refused
        out = numpy_reduce(x, axis=dims, dtype=x.dtype) if numpy_reduce in (np.sum, np.prod) \
            else numpy_reduce(x, axis=dims)
        if out.dtype.kind == "f":
            float_rule(t, out)
        return out

    return rule


def _eager_sum(axis: int):
    """``vector_sum`` (rows, ``axis`` -1) and ``column_sum`` (``axis`` -2): any
    order's sum where every value and the sum are whole numbers the type holds."""
    def rule(node, t, args):
        (x,) = args
        if x.shape[axis] == 0:
            raise _Refused
        _whole(t, x)
        out = np.sum(x, axis=axis, dtype=x.dtype)
        _whole(t, out)
        return out + x.dtype.type(0)  # (eager's sums start from +0: no -0)

    return rule


def _refuse():
    raise _Refused


def _extreme(t, x) -> None:
    """A float max or min: no NaN, and no tie of -0.0 and +0.0 (XLA's order decides)."""
    _no_nan(x)
    zeros = x[x == 0]
    if zeros.size and np.any(np.signbit(zeros)) and not np.all(np.signbit(zeros)):
        raise _Refused


def _arg(numpy_arg):
    def rule(node, t, args):
        (x,) = args
        _no_nan(x)  # (ties and NaN: the first, as NumPy; NaN left to the backend)
        return numpy_arg(x, axis=node.attrs["dim"]).astype(to_numpy_dtype(t.dtype))

    return rule


def _check(node, t, args):
    x, failed = args
    if bool(failed):
        raise _Refused  # the barrier's containment raises eager's error, with its message
    return x


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The index vectors of ``indices``, one per batch position: (batch..., n)."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _batching(b: tuple, start: list, operand_dims, indices_dims, index_vector_dim: int) -> None:
    """``start`` at each batching dim of the operand: the batch position's
    index along the paired dim of the indices (``b`` leaves out the index
    vector's dim)."""
    for od, sd in zip(operand_dims, indices_dims):
        start[od] = b[sd if sd < index_vector_dim else sd - 1]


def _gather(node, t, args):
    operand, indices = args
    a = node.attrs
    vectors = _index_vectors(indices.astype(np.int64), a["index_vector_dim"])
    if vectors.size > _POSITIONS:
        raise _Refused
    sizes = a["slice_sizes"]
    collapsed = set(a["collapsed_slice_dims"]) | set(a["operand_batching_dims"])
    offset_dims = tuple(a["offset_dims"])
    batch_shape = vectors.shape[:-1]
    kept = [d for d in range(operand.ndim) if d not in collapsed]
    out = np.empty(t.shape, dtype=operand.dtype)
    batch_dims = [d for d in range(len(t.shape)) if d not in offset_dims]
    for b in np.ndindex(*batch_shape):
        start = [0] * operand.ndim
        for k, d in enumerate(a["start_index_map"]):
            # gather clamps each start so the slice fits
            start[d] = int(min(max(vectors[b][k], 0), operand.shape[d] - sizes[d]))
        _batching(b, start, a["operand_batching_dims"], a["start_indices_batching_dims"], a["index_vector_dim"])
        window = operand[tuple(slice(s, s + n) for s, n in zip(start, sizes))]
        window = window.reshape([sizes[d] for d in kept])
        where: list = [None] * len(t.shape)
        for d, i in zip(batch_dims, b):
            where[d] = i
        for d in offset_dims:
            where[d] = slice(None)
        out[tuple(where)] = window
    return out


def _scatter(node, t, args):
    operand, indices, updates = args
    a = node.attrs
    mode = a["mode"]
    if mode not in ("replace", "add", "max", "min"):
        raise _Refused
    if operand.dtype.kind == "f":
        if mode == "add":
            _whole(t, operand, updates)
        else:
            _no_nan(operand, updates)
    vectors = _index_vectors(indices.astype(np.int64), a["index_vector_dim"])
    if vectors.size > _POSITIONS or operand.size > _POSITIONS:
        raise _Refused
    windows = tuple(a["update_window_dims"])
    inserted = set(a["inserted_window_dims"]) | set(a["input_batching_dims"])
    scatter_dims = [d for d in range(updates.ndim) if d not in windows]
    window_operand_dims = [d for d in range(operand.ndim) if d not in inserted]
    window_shape = [updates.shape[d] for d in windows]
    out = np.array(operand, copy=True)
    written: set = set()
    for b in np.ndindex(*vectors.shape[:-1]):
        start = [0] * operand.ndim
        for k, d in enumerate(a["scatter_dims_to_operand_dims"]):
            start[d] = int(vectors[b][k])
        _batching(b, start, a["input_batching_dims"], a["scatter_indices_batching_dims"], a["index_vector_dim"])
        full_window = [1] * operand.ndim
        for d, n in zip(window_operand_dims, window_shape):
            full_window[d] = n
        if any(s < 0 or s + n > size for s, n, size in zip(start, full_window, operand.shape)):
            raise _Refused  # XLA skips such an update; lazycore's checks say why it happened
        where: list = [slice(None)] * updates.ndim
        for d, i in zip(scatter_dims, b):
            where[d] = i
        window = updates[tuple(where)].reshape(full_window)
        target = tuple(slice(s, s + n) for s, n in zip(start, full_window))
        if mode == "replace":
            cells = {tuple(i) for i in np.argwhere(np.ones(full_window, dtype=bool)) + np.asarray(start)}
            if cells & written:
                raise _Refused  # which duplicate wins is XLA's choice
            written |= cells
            out[target] = window
        elif mode == "add":
            out[target] = out[target] + window
        elif mode == "max":
            out[target] = np.maximum(out[target], window)
        else:
            out[target] = np.minimum(out[target], window)
    if mode == "add":
        _whole(t, out)
    return out


def _window(starts, shape, sizes) -> tuple:
    """The slices of a ``sizes`` window of ``shape`` at ``starts`` clamped so
    that it fits (StableHLO's rule for dynamic_slice and dynamic_update_slice)."""
    begin = [int(min(max(int(s), 0), n - k)) for s, n, k in zip(starts, shape, sizes)]
    return tuple(slice(b, b + k) for b, k in zip(begin, sizes))


def _dynamic_slice(node, t, args):
    x, *starts = args
    return x[_window(starts, x.shape, node.attrs["sizes"])]


def _dynamic_update_slice(node, t, args):
    """``update`` written into a copy of ``x`` (a row of Qwen2-VL's vision position ids)."""
    x, update, *starts = args
    out = x.copy()
    out[_window(starts, x.shape, update.shape)] = update
    return out


def move(node, host: np.ndarray) -> np.ndarray:
    """``node`` (a reshape, permute, slice or reverse) applied to its operand's host value."""
    return _EVAL[node.op](node, node.types[0], [host])


_EVAL = {
    "constant": _constant,
    "iota": _iota,
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "permute": _permute,
    "slice": _slice,
    "concatenate": _concatenate,
    "reverse": _reverse,
    "pad": _pad,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "convert": _convert,
    "bitcast_convert": _bitcast,
    "compare": _exact,
    "select": _exact,
    "neg": _exact,
    "abs": _exact,
    "ceil": _exact,
    "floor": _exact,
    "round": _exact,
    "not": _int_only,
    "sign": _int_only,
    "and": _int_only,
    "or": _int_only,
    "xor": _int_only,
    "div": _arith,
    "rem": _int_only,
    "pow": _int_only,
    "add": _arith,
    "sub": _arith,
    "mul": _arith,
    "maximum": _ordered,
    "minimum": _ordered,
    "reduce_sum": _reduce(np.sum, _whole),
    "vector_sum": _eager_sum(-1),
    "column_sum": _eager_sum(-2),
    "reduce_prod": _reduce(np.prod, lambda t, x: _refuse()),
    "reduce_max": _reduce(np.max, _extreme),
    "reduce_min": _reduce(np.min, _extreme),
    "argmax": _arg(np.argmax),
    "argmin": _arg(np.argmin),
    "check": _check,
    "gather": _gather,
    "scatter": _scatter,
}
"""Op name -> ``rule(node, result type, operand arrays)``: the result array,
or None / :class:`_Refused` where the host cannot promise the device's bits."""
