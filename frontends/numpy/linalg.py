"""Linear algebra: products (``multi_dot`` and ``matrix_power`` too), contractions, ``einsum``, ``trace`` and norms.

Every product is one ``lazy.dot_general`` (batch, contract and free dims)
plus shape ops, after casting both operands to NumPy's result type (on f32
XLA is asked for full precision, so results match NumPy's to rounding).
Booleans multiply as integers and compare with zero at the end, which is
NumPy's logical or-of-ands.

This module is ``lazycore.numpy.linalg`` (``np.linalg.norm``); the products
NumPy keeps at the top level (``dot``, ``matmul``, ``einsum``, ...) are
published there too. The factorizations and solvers built on the dialect's
factorization ops (``cholesky``, ``qr``, ``eigh``, ``svd``, ``solve``, ``inv``,
``det``, ...) are in :mod:`.decompositions`; the rest (``eig``, ``eigvals``,
``tensorsolve``, ...) run NumPy (counted fallbacks) through this module's
``__getattr__``.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from lazycore.trace import core

from . import reductions
from .array import ndarray, value, wrap
from .fallback import call_numpy, implements
from .manipulation import diagonal as _diagonal, diagonal_view
from .creation import eye as _eye
from .scalars import result
from .ufuncs import UFUNCS, apply, asarray_like, broadcast_to_shape, cast, const, store_out

TOP_LEVEL = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "einsum_path", "trace", "vecdot"]
__all__ = TOP_LEVEL + ["norm", "vector_norm", "matrix_norm", "vecdot", "matrix_transpose"]

_multiply, _absolute, _sqrt, _power = (UFUNCS[n] for n in ("multiply", "absolute", "sqrt", "power"))
_SIGNATURE = "(n?,k),(k,m?)->(n?,m?)"


# --- the one contraction ------------------------------------------------------------------------


def _contract(ha, hb, dt, lhs_batch=(), rhs_batch=(), lhs_contract=(), rhs_contract=()):
    """``dot_general`` of two handles in NumPy dtype ``dt``; dims: batch, lhs free, rhs free."""
    work = np.dtype(np.int64) if dt.kind == "b" else dt
    ha, hb = cast(ha, work), cast(hb, work)
    r = apply("dot_general", ha, hb, lhs_batch=tuple(lhs_batch), rhs_batch=tuple(rhs_batch),
              lhs_contract=tuple(lhs_contract), rhs_contract=tuple(rhs_contract))
    return cast(r, dt) if dt.kind == "b" else r


def _operand(x) -> ndarray:
    # Python scalars are strong here: NumPy's products convert them with asarray
    return asarray_like(x)


def _result_type(*arrays, dtype=None):
    return np.dtype(dtype) if dtype is not None else np.result_type(*(a.dtype for a in arrays))


def _to_out(res: ndarray, out, name: str):
    return store_out(result(res), out, name + ": output array has wrong shape {got}, expected {want}")


def _shape_text(shape) -> str:
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


# --- matmul, dot, vdot, inner, outer, tensordot --------------------------------------------------


def matmul(x1, x2, /, out=None, *, dtype=None, casting="same_kind", order="K", subok=True, **kwargs):
    """``x1 @ x2``: NumPy's 1-D promotion and batch broadcasting, one ``dot_general``."""
    if kwargs or order not in "KCA":
        return call_numpy(np.matmul, (x1, x2), dict(kwargs, out=out, dtype=dtype, casting=casting, order=order))
    a, b = _operand(x1), _operand(x2)
    for i, x in enumerate((a, b)):
        if x.ndim == 0:
            raise ValueError(f"matmul: Input operand {i} does not have enough dimensions (has 0, gufunc core with "
                             f"signature {_SIGNATURE} requires 1)")
    dt = np.matmul.resolve_dtypes((a.dtype, b.dtype, None if dtype is None else np.dtype(dtype)),
                                  casting=casting)[-1]
    ha, hb = value(a), value(b)
    if a.ndim == 1:
        ha = apply("reshape", ha, shape=(1,) + a.shape)
    if b.ndim == 1:
        hb = apply("reshape", hb, shape=b.shape + (1,))
    sa, sb = ha.shape, hb.shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                         f"{_SIGNATURE} (size {sb[-2]} is different from {sa[-1]})")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ValueError(f"operands could not be broadcast together with shapes {_shape_text(a.shape)} "
                         f"{_shape_text(b.shape)} (matmul batch dims)") from None
    nb = len(batch)
    if len(sb) == 2:  # (..., n, k) @ (k, m): no batching needed, free dims come out in order
        r = _contract(ha, hb, dt, lhs_contract=(len(sa) - 1,), rhs_contract=(0,))
    elif len(sa) == 2:  # (n, k) @ (..., k, m): result (n, ..., m), moved into place
        r = _contract(ha, hb, dt, lhs_contract=(1,), rhs_contract=(len(sb) - 2,))
        r = apply("permute", r, dims=tuple(range(1, nb + 1)) + (0, nb + 1))
    else:
        ha = broadcast_to_shape(ha, batch + sa[-2:])
        hb = broadcast_to_shape(hb, batch + sb[-2:])
        r = _contract(ha, hb, dt, lhs_batch=range(nb), rhs_batch=range(nb),
                      lhs_contract=(nb + 1,), rhs_contract=(nb,))
    r = cast(r, dt)
    shape = batch + ((sa[-2],) if a.ndim > 1 else ()) + ((sb[-1],) if b.ndim > 1 else ())
    if r.shape != shape:
        r = apply("reshape", r, shape=shape)
    res = wrap(r, dt)
    if out is not None:
        if isinstance(out, tuple):
            (out,) = out
        if isinstance(out, ndarray) and not np.can_cast(dt, out.dtype, casting):
            raise TypeError(f"Cannot cast ufunc 'matmul' output from {dt!r} to {out.dtype!r} with casting rule "
                            f"'{casting}'")
    return _to_out(res, out, "matmul")


@implements(np.dot)
def dot(a, b, out=None):
    a, b = _operand(a), _operand(b)
    if a.ndim == 0 or b.ndim == 0:
        return _to_out(_multiply(a, b), out, "dot")
    dt = _result_type(a, b)
    bd = 0 if b.ndim == 1 else b.ndim - 2
    if a.shape[-1] != b.shape[bd]:
        raise ValueError(f"shapes {_shape_text(a.shape)} and {_shape_text(b.shape)} not aligned: "
                         f"{a.shape[-1]} (dim {a.ndim - 1}) != {b.shape[bd]} (dim {bd})")
    r = _contract(value(a), value(b), dt, lhs_contract=(a.ndim - 1,), rhs_contract=(bd,))
    return _to_out(wrap(r, dt), out, "dot")


@implements(np.vdot)
def vdot(a, b, /):
    a, b = _operand(a), _operand(b)
    if a.size != b.size:
        raise ValueError("vectors have different lengths")
    dt = _result_type(a, b)
    ha = apply("reshape", value(a), shape=(a.size,))
    hb = apply("reshape", value(b), shape=(b.size,))
    if a.dtype.kind == "c":  # vdot conjugates its first argument
        ha = value(UFUNCS["conjugate"](wrap(ha, a.dtype)))
    return result(wrap(_contract(ha, hb, dt, lhs_contract=(0,), rhs_contract=(0,)), dt))


@implements(np.inner)
def inner(a, b, /):
    a, b = _operand(a), _operand(b)
    if a.ndim == 0 or b.ndim == 0:
        return _multiply(a, b)
    if a.shape[-1] != b.shape[-1]:
        bt = b.shape[-1:] + b.shape[:-1]
        raise ValueError(f"shapes {_shape_text(a.shape)} and {_shape_text(bt)} not aligned: "
                         f"{a.shape[-1]} (dim {a.ndim - 1}) != {b.shape[-1]} (dim 0)")
    dt = _result_type(a, b)
    return result(wrap(_contract(value(a), value(b), dt, lhs_contract=(a.ndim - 1,), rhs_contract=(b.ndim - 1,)), dt))


@implements(np.outer)
def outer(a, b, out=None):
    a, b = _operand(a), _operand(b)
    return _to_out(_multiply(a.reshape(-1, 1), b.reshape(1, -1)), out, "outer")


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    a, b = _operand(a), _operand(b)
    try:
        iter(axes)
    except TypeError:
        n = operator.index(axes)
        axes_a, axes_b = list(range(-n, 0)), list(range(0, n))
    else:
        axes_a, axes_b = axes
    axes_a = list(axes_a) if isinstance(axes_a, (list, tuple, range)) else [axes_a]
    axes_b = list(axes_b) if isinstance(axes_b, (list, tuple, range)) else [axes_b]
    if len(axes_a) != len(axes_b) or any(a.shape[i] != b.shape[j] for i, j in zip(axes_a, axes_b)):
        raise ValueError("shape-mismatch for sum")
    ca = [i % a.ndim for i in axes_a]
    cb = [j % b.ndim for j in axes_b]
    if len(set(ca)) != len(ca) or len(set(cb)) != len(cb):
        raise ValueError("repeated axis in tensordot axes")
    dt = _result_type(a, b)
    return wrap(_contract(value(a), value(b), dt, lhs_contract=ca, rhs_contract=cb), dt)


# --- einsum ----------------------------------------------------------------------------------------------------


class _Unsupported(Exception):
    """An einsum form this lowering leaves to NumPy (which also raises NumPy's errors)."""


def _parse_einsum(subscripts: str, shapes):
    """Input label lists and the output label list; ``...`` dims get private labels."""
    subs = subscripts.replace(" ", "")
    if "->" in subs:
        lhs, out = subs.split("->", 1)
    else:
        lhs, out = subs, None
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _Unsupported
    n_ell = 0
    parsed = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            head, tail = term.split("...", 1)
            k = len(shape) - len(head) - len(tail)
            if k < 0:
                raise _Unsupported
            n_ell = max(n_ell, k)
            parsed.append((list(head), k, list(tail)))
        else:
            if len(term) != len(shape):
                raise _Unsupported
            parsed.append((list(term), None, []))
    letters = [c for head, _, tail in parsed for c in head + tail]
    if any(not (c.isascii() and c.isalpha()) for c in letters):
        raise _Unsupported
    ell = [chr(0x100 + i) for i in range(n_ell)]  # right-aligned, as ``...`` broadcasts
    inputs = [head + ([] if k is None else ell[n_ell - k:]) + tail for head, k, tail in parsed]
    if out is None:
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        output = ell + once
    else:
        if out.count("...") > 1 or (n_ell and "..." not in out):
            raise _Unsupported
        head, _, tail = out.partition("...")
        if any(not (c.isascii() and c.isalpha()) for c in head + tail):
            raise _Unsupported
        output = list(head) + (ell if "..." in out else []) + list(tail)
        if len(set(output)) != len(output) or any(c not in letters and c not in ell for c in output):
            raise _Unsupported
    return inputs, output


def _take_diagonals(x: ndarray, labels):
    """``x`` with each label it repeats taken once, along its diagonal (last, as
    :func:`diagonal` puts it); the labels of the result."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        if x.shape[i] != x.shape[j]:
            raise _Unsupported  # NumPy's error
        x = diagonal_view(x, 0, i, j)
        labels = [l for k, l in enumerate(labels) if k not in (i, j)] + [c]
    return x, labels


def _sublists(operands):
    """The sublist call form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as subscripts and arrays."""
    def term(sub):
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append("...")
            elif isinstance(s, (int, np.integer)) and 0 <= s < len(_SYMBOLS):
                parts.append(_SYMBOLS[s])
            else:
                raise _Unsupported  # NumPy's error
        return "".join(parts)

    arrays, terms = list(operands[0::2]), [term(s) for s in operands[1::2]]
    if len(operands) % 2:
        output = arrays.pop()  # odd count: the last operand is the output's sublist
        return ",".join(terms) + "->" + term(output), arrays
    return ",".join(terms), arrays


_SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"  # NumPy's order for sublist integers


def _sum_out(h, labels, keep):
    """Sum the dims whose labels are not in ``keep``."""
    drop = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not drop:
        return h, labels
    return apply("reduce_sum", h, dims=drop), [c for c in labels if c in keep]


def _next_pair(ops, output, sizes):
    """The two operands whose product is smallest (NumPy's greedy order, roughly):
    contracting shared labels first keeps intermediates small."""
    best = None
    for i in range(len(ops)):
        for j in range(i + 1, len(ops)):
            later = set(output).union(*(set(l) for k, (_, l) in enumerate(ops) if k not in (i, j)))
            kept = (set(ops[i][1]) | set(ops[j][1])) & later
            cost = (math.prod(sizes[c] for c in kept), i, j)
            best = cost if best is None or cost < best else best
    return best[1], best[2]


@implements(np.einsum_path)
def einsum_path(*operands, optimize="greedy", einsum_call=False):
    """NumPy's contraction order, which depends on the operands' shapes only: NumPy's
    own planner on stand-ins of those shapes (no value read)."""
    if einsum_call:  # (NumPy's own einsum asks for its operands back)
        return call_numpy(np.einsum_path, operands, dict(optimize=optimize, einsum_call=True))
    stand = [np.broadcast_to(np.zeros((), x.dtype), x.shape) if isinstance(x, ndarray) else x for x in operands]
    return np.einsum_path(*stand, optimize=optimize, einsum_call=einsum_call)


@implements(np.einsum)
def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    """Pairwise ``dot_general`` (smallest product first), labels no later operand
    or the output needs summed out before. Labels of size 1 broadcast, as in
    NumPy. A label twice in one operand takes its diagonal first (a view, as
    NumPy's); the sublist call form is the same call spelled with integers.
    ``optimize`` is accepted and ignored."""
    try:
        if not operands or order not in "KCA":
            raise _Unsupported
        if isinstance(operands[0], str):
            subscripts, arrays = operands[0], list(operands[1:])
        else:
            subscripts, arrays = _sublists(operands)
        arrays = [_operand(x) for x in arrays]
        inputs, output = _parse_einsum(subscripts, [x.shape for x in arrays])
        arrays, inputs = map(list, zip(*(_take_diagonals(x, labels) for x, labels in zip(arrays, inputs))))
        sizes = {}
        for labels, x in zip(inputs, arrays):
            for c, n in zip(labels, x.shape):
                if sizes.get(c, 1) not in (1, n) and n != 1:
                    raise _Unsupported
                sizes[c] = max(sizes.get(c, n), n)
    except _Unsupported:
        return call_numpy(np.einsum, operands, dict(out=out, dtype=dtype, order=order, casting=casting,
                                                    optimize=optimize))
    dt = _result_type(*arrays, dtype=dtype)
    for x in arrays:
        if not np.can_cast(x.dtype, dt, casting):
            raise TypeError(f"Cannot cast array data from {x.dtype!r} to {dt!r} according to the rule '{casting}'")
    if len(arrays) == 1 and sorted(inputs[0]) == sorted(output) and dtype is None and out is None:
        return arrays[0].transpose([inputs[0].index(c) for c in output])  # NumPy returns a view here
    work = np.dtype(np.int64) if dt.kind == "b" else dt
    ops = []
    for labels, x in zip(inputs, arrays):
        h = cast(value(x), work)
        full = tuple(sizes[c] for c in labels)
        if h.shape != full:
            h = broadcast_to_shape(h, full)
        ops.append((h, labels))
    while len(ops) > 1:
        i, j = _next_pair(ops, output, sizes)
        (h, labels), (h2, labels2) = ops[i], ops[j]
        later = set(output).union(*(set(l) for k, (_, l) in enumerate(ops) if k not in (i, j)))
        h, labels = _sum_out(h, labels, later | set(labels2))
        h2, labels2 = _sum_out(h2, labels2, later | set(labels))
        shared = [c for c in labels if c in labels2]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        h = apply("dot_general", h, h2,
                  lhs_batch=tuple(labels.index(c) for c in batch), rhs_batch=tuple(labels2.index(c) for c in batch),
                  lhs_contract=tuple(labels.index(c) for c in contract),
                  rhs_contract=tuple(labels2.index(c) for c in contract))
        labels = batch + [c for c in labels if c not in shared] + [c for c in labels2 if c not in shared]
        ops = [op for k, op in enumerate(ops) if k not in (i, j)] + [(h, labels)]
    h, labels = ops[0]
    h, labels = _sum_out(h, labels, set(output))
    perm = tuple(labels.index(c) for c in output)
    if perm != tuple(range(len(perm))):
        h = apply("permute", h, dims=perm)
    return _to_out(wrap(cast(h, dt), dt), out, "einsum")


# --- trace ------------------------------------------------------------------------------------------------------


def _trace_dtype(dt, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    # as np.sum: bools and small integers add up in the platform integers
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return np.dtype(np.int64)
    if dt.kind == "u" and dt.itemsize < 8:
        return np.dtype(np.uint64)
    return dt


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum of the diagonal: the elements where row + offset == column, selected and summed."""
    a = _operand(a)
    if a.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    ax1, ax2 = normalize_axis_index(axis1, a.ndim), normalize_axis_index(axis2, a.ndim)
    if ax1 == ax2:
        raise ValueError("axis1 and axis2 cannot be the same")
    dt = _trace_dtype(a.dtype, dtype)
    h = cast(value(a), dt)
    rows = core.apply("iota", dim=0, shape=(a.shape[ax1], a.shape[ax2]), dtype="i64", device=h.device)
    cols = core.apply("iota", dim=1, shape=(a.shape[ax1], a.shape[ax2]), dtype="i64", device=h.device)
    on = apply("compare", apply("add", rows, const(operator.index(offset), rows)), cols, direction="EQ")
    on = apply("broadcast_in_dim", on, dims=(ax1, ax2), shape=a.shape)
    h = apply("select", on, h, const(0, h))
    return _to_out(wrap(apply("reduce_sum", h, dims=tuple(sorted((ax1, ax2)))), dt), out, "trace")


# --- norms ------------------------------------------------------------------------------------------------------


def _float(x: ndarray) -> ndarray:
    return x if x.dtype.kind in "fc" else x.astype(np.float64)  # (complex: the SVD-based norms only)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _sqrt(reductions.sum(_multiply(x, x), axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord == math.inf:
        return reductions.max(_absolute(x), axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return reductions.min(_absolute(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return reductions.sum((x != 0).astype(x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return reductions.sum(_absolute(x), axis=axis, keepdims=keepdims)
    total = reductions.sum(_power(_absolute(x), float(ord)), axis=axis, keepdims=keepdims)
    return _power(total, 1.0 / float(ord))


def _matrix_norm(x, ord, row, col, keepdims):
    if ord in (None, "fro", "f"):
        r = _sqrt(reductions.sum(_multiply(x, x), axis=(row, col)))
    elif ord in (1, -1):
        pick = reductions.max if ord == 1 else reductions.min
        r = pick(reductions.sum(_absolute(x), axis=row), axis=col - 1 if col > row else col)
    elif ord in (math.inf, -math.inf):
        pick = reductions.max if ord == math.inf else reductions.min
        r = pick(reductions.sum(_absolute(x), axis=col), axis=row - 1 if row > col else row)
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        shape = list(x.shape)
        shape[row] = shape[col] = 1
        r = r.reshape(shape)
    return r


def _svd_norm(x, ord, row, col, keepdims):
    """The 2-, -2- and nuclear norms: the largest, smallest and summed singular values."""
    if x.size == 0 or not decompositions.lazy_svd(x):
        return call_numpy(np.linalg.norm, (x,), dict(ord=ord, axis=(row, col), keepdims=keepdims),
                          name="numpy.linalg.norm")
    rest = [d for d in range(x.ndim) if d not in (row, col)]
    s = decompositions.svd(x.transpose(rest + [row, col]), compute_uv=False)
    pick = reductions.max if ord == 2 else reductions.min if ord == -2 else reductions.sum
    r = pick(s, axis=-1)
    if keepdims:
        shape = list(x.shape)
        shape[row] = shape[col] = 1
        r = r.reshape(shape)
    return r


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms (any ``ord``) and the Frobenius, 1- and inf-norms of matrices
    lazily; the SVD-based matrix norms (2, -2, 'nuc') from ``lazy.svd``'s singular values."""
    x = _operand(x)
    if x.dtype.kind == "c":
        # every norm but the SVD-based ones depends on the moduli alone
        matrix = (axis is None and x.ndim == 2 and ord is not None) or (isinstance(axis, tuple) and len(axis) == 2)
        if not (matrix and ord in (2, -2, "nuc")):
            x = _absolute(x)
    x = _float(x)
    nd = x.ndim
    if axis is None:
        if ord is None:
            r = _sqrt(reductions.sum(_multiply(x, x)))
            return r.reshape((1,) * nd) if keepdims else r
        if nd not in (1, 2):
            raise ValueError("Improper number of dimensions to norm.")
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (operator.index(axis),)
        except TypeError:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from None
    if len(axis) == 1:
        return _vector_norm(x, ord, normalize_axis_tuple(axis, nd), keepdims)
    if len(axis) == 2:
        row, col = normalize_axis_index(axis[0], nd), normalize_axis_index(axis[1], nd)
        if row == col:
            raise ValueError("Duplicate axes given.")
        if ord in (2, -2, "nuc"):
            return _svd_norm(x, ord, row, col, keepdims)
        return _matrix_norm(x, ord, row, col, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


@implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = _float(_operand(x))
    if axis is None:
        r = _vector_norm(x.reshape(-1), ord, (0,), False)
        return r.reshape((1,) * x.ndim) if keepdims else r
    return _vector_norm(x, ord, normalize_axis_tuple(axis, x.ndim), keepdims)


@implements(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    x = _operand(x)
    if x.ndim < 2:
        raise ValueError(f"The input array must be at least 2-dimensional, but it has {x.ndim} dimension(s)")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


@implements(np.linalg.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    a, b = _operand(x1), _operand(x2)
    if not (a.ndim and b.ndim and -min(a.ndim, b.ndim) <= axis < min(a.ndim, b.ndim)
            and a.shape[axis] == b.shape[axis]):
        # NumPy's vecdot is a gufunc: the vectors' dim never broadcasts. Its error, asked
        # of zero-stride stand-ins of the shapes
        np.linalg.vecdot(*(np.broadcast_to(np.zeros((), x.dtype), x.shape) for x in (a, b)), axis=axis)
    if a.dtype.kind == "c":  # NumPy's vecdot conjugates the first vector
        a = UFUNCS["conjugate"](a)
    product = _multiply(a, b)
    # summed in the operands' type, as NumPy's vecdot loop does (sum would widen small ints)
    return reductions.sum(product, axis=axis, dtype=product.dtype)


def _cross3(a: ndarray, b: ndarray, axisa: int, axisb: int, axisc: int) -> ndarray:
    """NumPy's cross product of 3-vectors, its products and differences in its order
    (``a1*b2 - a2*b1``, ...), the vectors broadcast, the result's vector axis at ``axisc``."""
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    a0, a1, a2, b0, b1, b2 = a[..., 0], a[..., 1], a[..., 2], b[..., 0], b[..., 1], b[..., 2]
    c = np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return np.moveaxis(c, -1, axisc)


def _vectors3(a: ndarray, b: ndarray, axisa: int, axisb: int) -> bool:
    """Both operands hold 3-vectors along their (valid) axes, of a numeric dtype."""
    return (a.ndim and b.ndim and -a.ndim <= axisa < a.ndim and -b.ndim <= axisb < b.ndim
            and a.shape[axisa] == 3 and b.shape[axisb] == 3 and a.dtype.kind in "iufc" and b.dtype.kind in "iufc")


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    a, b = _operand(a), _operand(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    if not _vectors3(a, b, axisa, axisb) or not -max(a.ndim, b.ndim) <= axisc < max(a.ndim, b.ndim):
        # 2-vectors, bool operands and NumPy's errors: NumPy's, counted
        return call_numpy(np.cross, (a, b), dict(axisa=axisa, axisb=axisb, axisc=axisc, axis=axis))
    return _cross3(a, b, axisa, axisb, axisc)


@implements(np.linalg.cross)
def linalg_cross(x1, x2, /, *, axis=-1):
    a, b = _operand(x1), _operand(x2)
    if not _vectors3(a, b, axis, axis):
        return call_numpy(np.linalg.cross, (a, b), dict(axis=axis))
    return _cross3(a, b, axis, axis, axis)


@implements(np.linalg.matrix_transpose)
def matrix_transpose(x, /):
    x = _operand(x)
    if x.ndim < 2:
        raise ValueError(f"Input array must be at least 2-dimensional, but it is {x.ndim}")
    return x.swapaxes(-1, -2)


@implements(np.linalg.matmul)
def _linalg_matmul(x1, x2, /):
    return matmul(x1, x2)


@implements(np.linalg.outer)
def _linalg_outer(x1, x2, /):
    a, b = _operand(x1), _operand(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={a.ndim} and "
                         f"x2.ndim={b.ndim}.")
    return TOP["outer"](a, b)


@implements(np.linalg.tensordot)
def _linalg_tensordot(x1, x2, /, *, axes=2):
    return TOP["tensordot"](x1, x2, axes=axes)


@implements(np.linalg.trace)
def _linalg_trace(x, /, *, offset=0, dtype=None):
    return TOP["trace"](x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


@implements(np.linalg.diagonal)
def diagonal(x, /, *, offset=0):
    """The Array API's diagonal: of the last two axes, a view (NumPy's)."""
    return _diagonal(x, offset, -2, -1)


# --- products of several matrices -----------------------------------------------------------------


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    """NumPy's products in NumPy's order (its short cuts to 3, then the binary
    decomposition of ``n``), so the same rounding; a negative power needs an
    inverse: NumPy's."""
    a = _operand(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError("exponent must be an integer") from e
    if n < 0:  # NumPy's: the inverse's power
        a, n = inv(a), -n
    if n == 0:
        one = _eye(a.shape[-1], dtype=a.dtype)
        return wrap(broadcast_to_shape(value(one), a.shape), a.dtype)
    if n <= 3:
        return a if n == 1 else matmul(a, a) if n == 2 else matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _chain_order(shapes) -> list:
    """NumPy's ``_multi_dot_matrix_chain_order``: the split of each sub-chain
    with the fewest scalar multiplications (the first such split on a tie)."""
    p = [s[0] for s in shapes] + [shapes[-1][1]]
    n = len(shapes)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k
    return split


def _chain(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return dot(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """Products in NumPy's order (the cheapest parenthesization, as NumPy
    finds it), so the same rounding; 1-d ends as NumPy treats them."""
    arrays = [_operand(a) for a in arrays]
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return dot(arrays[0], arrays[1], out=out)
    first, last = arrays[0].ndim, arrays[-1].ndim
    if first == 1:
        arrays[0] = arrays[0].reshape(1, -1)
    if last == 1:
        arrays[-1] = arrays[-1].reshape(-1, 1)
    for a in arrays:
        if a.ndim != 2:
            raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if n == 3:
        (a0, a1b0), (b1c0, c1) = arrays[0].shape, arrays[2].shape
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            res = dot(dot(arrays[0], arrays[1]), arrays[2])
        else:
            res = dot(arrays[0], dot(arrays[1], arrays[2]))
    else:
        res = _chain(arrays, _chain_order([a.shape for a in arrays]), 0, n - 1)
    if first == 1 and last == 1:
        res = res[0, 0]
    elif first == 1 or last == 1:
        res = res.reshape(-1)
    return res if out is None else _to_out(res, out, "multi_dot")


from . import decompositions  # noqa: E402
from .decompositions import (  # noqa: E402,F401
    cholesky, cond, det, eigh, eigvalsh, inv, lstsq, matrix_rank, pinv, qr, slogdet, solve, svd, svdvals,
)


def __getattr__(name):
    """Everything else in ``numpy.linalg`` (inv, solve, det, svd, ...): NumPy itself, counted."""
    target = getattr(np.linalg, name, None)
    if target is None:
        raise AttributeError(f"module 'lazycore.numpy.linalg' has no attribute '{name}'")
    if not callable(target) or isinstance(target, type):
        return target  # LinAlgError and friends

    def call(*args, **kwargs):
        return call_numpy(target, args, kwargs, name=f"numpy.linalg.{name}")

    call.__name__ = name
    call.__doc__ = target.__doc__
    call.__wrapped__ = target  # inspect.signature(call): NumPy's signature
    return call


TOP = {name: globals()[name] for name in TOP_LEVEL}  # the top-level versions (the package exports them)
# numpy.linalg's own outer and trace differ from the top-level ones (1-D only; the last two axes)
outer, trace, tensordot = _linalg_outer, _linalg_trace, _linalg_tensordot  # noqa: F811
