"""The core API frontends build on.

Make lazy values (:func:`from_numpy`, :func:`from_buffer`, :func:`scalar`),
apply ``lazy`` ops to them (:func:`apply`), update them in place
(:func:`assign`), and observe them (:func:`to_numpy`, an implicit barrier) or
run everything pending (:func:`mark_step`).

:func:`apply` is the per-op path: it runs the op's shape rule, so a bad call
raises :class:`~lazycore.dialect.ShapeError` right at the user's line, and
records a graph node. It does no MLIR work and never walks the graph.
"""

from __future__ import annotations

import sys as _sys

import numpy as np

from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir.context import LOCK as _LOCK
from lazycore.ir.context import TRACE
from lazycore.ir.failure import BarrierError  # noqa: F401  (what reading a failed value raises)
from lazycore.ir.config import settings as _settings
from lazycore.ir.graph import LOG as _LOG
from lazycore.ir.graph import Data, Scalar, Value, constant, make_node
from lazycore.ir.sourceloc import caller as _user_frame
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import buckets as _buckets
from lazycore.runtime import device as _device
from lazycore.runtime import autostep as _autostep  # noqa: F401  (gives TRACE its cutter, read per op)
from lazycore.trace import eager_core as _eager_core
from lazycore.trace.scalar_policy import POLICY as _POLICY
from lazycore.runtime.transfer import (  # noqa: F401  (the core API: values in and out)
    Upload,
    from_buffer,
    from_host,
    from_numpy,
    live_tensors,
    mark_step,
    to_buffer,
    to_device,
    to_numpy,
)

__all__ = [
    "BarrierError",
    "LazyTensor",
    "Upload",
    "apply",
    "assign",
    "broadcast_to",
    "check",
    "convert_to",
    "devices",
    "default_device",
    "dynamic",
    "from_buffer",
    "from_host",
    "from_numpy",
    "live_tensors",
    "mark_step",
    "scalar",
    "to_buffer",
    "to_device",
    "to_numpy",
]

devices = _device.devices
default_device = _device.default_device


# --- making values ---------------------------------------------------------------


def _scalar_dtype(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "i1"
    if isinstance(value, (int, np.integer)):
        return "i64"
    if isinstance(value, (float, np.floating)):
        return "f32"
    raise TypeError(f"expected a Python scalar, got {type(value).__name__}")


def scalar(value, dtype: str | None = None, device=None, fold: bool = True, until_varied: bool = False) -> LazyTensor:
    """A rank-0 lazy value from a Python scalar, by the learned scalar policy.

    0 and 1 are baked into the program as ``lazy.constant`` (they enable
    folds like ``x * 1``); any other number becomes a program parameter whose
    hash covers only its dtype, so a new learning rate does not recompile.
    A place of the step's graph where the number has taken two different
    values makes it a parameter from then on, 0 and 1 included
    (:mod:`lazycore.trace.scalar_policy`).
    ``fold=False``: a parameter whatever the value (a value that passes
    through 0 or 1, such as a scheduled learning rate, keeps one program).
    ``until_varied``: baked whatever the value until its place has seen two
    (an index: a constant start keeps XLA's static slice).
    """
    with _LOCK:  # one op at a time across threads (docs/threads.md)
        cutter = TRACE.cutter
        if cutter.due or len(_LOG.nodes) >= _settings.auto_barrier_nodes:
            cutter.cut()  # a step ended (lazycore.runtime.autostep)
        source = arg = None
        rec = TRACE.recorder
        if rec is not None:  # lazycore.recipes: a float argument of the recorded call?
            value, source = rec.plain(value)
            if source is not None:
                arg = (rec.place, source)
            elif type(value) is int and fold:  # or an int argument (its value in the recording's key)
                arg = rec.int_place(value)
        dtype = dtype or _scalar_dtype(value)
        host = np.asarray(value, dtype=to_numpy_dtype(dtype))  # out-of-range values fail here
        dev = _device.get(device)
        node = (constant(host) if fold and _POLICY.bake(value, dtype, arg, True if until_varied else None)
                else Scalar(host, dtype))
        if rec is not None:  # a constant of the recording, or that argument's parameter
            if arg is not None and source is None and type(node) is Scalar:
                source = (value,)  # an int argument's parameter: one per replay (lazycore.trace.recipes)
            node = rec.on_leaf(node, source) or node  # (a recipe's: the shared node of this value)
        return LazyTensor(Value(node, 0), dev)


# --- applying ops ------------------------------------------------------------------


_SPECS: dict = {}


def _spec(op_name: str):
    # spec_of builds a string per call; the hot path looks names up here first.
    spec = _SPECS[op_name] = spec_of(op_name)
    return spec


_new_value = tuple.__new__


def apply(op_name: str, *operands, device=None, **attrs_and_params):
    """Apply ``lazy.<op_name>`` to lazy values (a list for a variadic group).

    Attributes and result parameters (``shape``, ``dtype``) are keywords, as
    in the op table. ``device`` only matters for ops without operands. Returns
    a LazyTensor, or a tuple of them for a multi-result op.
    """
    with _LOCK:  # the op is one step of the shared graph (docs/threads.md)
        cutter = TRACE.cutter
        if cutter.due or len(_LOG.nodes) >= _settings.auto_barrier_nodes:
            cutter.cut(operands)  # a step ended: before the operands are read (lazycore.runtime.autostep)
        spec = _SPECS.get(op_name) or _spec(op_name)
        values, types = [], []
        dev = None
        for o in operands:
            if isinstance(o, LazyTensor):
                v = o._value
                values.append(v)
                types.append(v[0].types[v[1]])
                d = o.device
                if d is not dev:  # (the first operand's device is the op's, with no call)
                    dev = d if dev is None else _check_device(spec, dev, d, len(values) - 1)
            elif isinstance(o, (list, tuple)):
                group = []
                for t in o:
                    if not isinstance(t, LazyTensor):
                        _bad_operand(spec, t, len(values))
                    if t.device is not dev:
                        dev = _check_device(spec, dev, t.device, len(values))
                    group.append(t._value)
                values.append(tuple(group))
                types.append([v.type for v in group])
            else:
                _bad_operand(spec, o, len(values))
        if dev is None:
            dev = _device.get(device)
        elif device is not None:
            _check_device(spec, dev, _device.get(device), "device=")
        result_types = spec.infer(*types, **attrs_and_params)
        node = make_node(spec, values, attrs_and_params, result_types, _user_frame())
        rec = TRACE.recorder
        if rec is not None:  # lazycore.recipes
            node = rec.on_node(spec, operands, node, attrs_and_params) or node  # (a recipe's: maybe a shared node)
        if len(result_types) == 1:
            return LazyTensor(_new_value(Value, (node, 0)), dev)
        return tuple(LazyTensor(_new_value(Value, (node, i)), dev) for i in range(len(result_types)))


def _check_device(spec, first, other, position):
    """The device of the operands so far; refuses a second device."""
    if first is None:
        return other
    _device.check_same(spec.full_name, first, other, position)
    return first


def _bad_operand(spec, o, position):
    raise TypeError(
        f"{spec.full_name}: operand {position} is a {type(o).__name__}, not a LazyTensor "
        f"(make Python scalars with lazycore.scalar)"
    )


def broadcast_to(t: LazyTensor, shape) -> LazyTensor:
    """``t`` broadcast to ``shape`` by the array rule frontends share: trailing
    dims align and size-1 dims stretch. (A ``shape`` with fewer dims is allowed
    when the extra dims are 1: a reshape.)"""
    shape = tuple(shape)
    if t.shape == shape:
        return t
    lead = len(shape) - len(t.shape)
    if lead < 0:
        return apply("reshape", t, shape=shape)
    keep = [i for i, n in enumerate(t.shape) if n == shape[lead + i]]
    if len(keep) != len(t.shape):
        # stretched size-1 dims: drop them, then place the rest
        t = apply("reshape", t, shape=tuple(t.shape[i] for i in keep))
    return apply("broadcast_in_dim", t, dims=tuple(lead + i for i in keep), shape=shape)


def convert_to(t: LazyTensor, dtype: str) -> LazyTensor:
    """``t`` with element type ``dtype``; to ``i1`` it means "nonzero", as in
    torch and NumPy (a plain convert would truncate)."""
    if t.dtype == dtype:
        return t
    if dtype == "i1":
        zero = apply("constant", value=np.zeros((), to_numpy_dtype(t.dtype)), device=t.device)
        return apply("compare", t, broadcast_to(zero, t.shape), direction="NE")
    return apply("convert", t, dtype=dtype)


def check(x: LazyTensor, failed: LazyTensor, message: str, error: str = "RuntimeError") -> LazyTensor:
    """``x``, checked: where any element of the i1 ``failed`` is true, every
    value computed from the result fails at its barrier, and reading one raises
    :class:`BarrierError` with ``message`` and the line that called this
    (:mod:`lazycore.runtime.checks`); the error is also an ``error`` (the name
    of eager's exception type, one of ``lazycore.dialect.checks.ERRORS``). For
    eager's errors that only values can tell (torch's integer division by zero)."""
    if failed.shape != ():
        failed = apply("reduce_max", failed, dims=tuple(range(len(failed.shape))))
    return apply("check", x, failed, message=message, error=error)


def assign(target: LazyTensor, new: LazyTensor) -> LazyTensor:
    """In-place update of ``target`` (see :meth:`LazyTensor.assign`)."""
    return target.assign(new)


def dynamic(t: LazyTensor, dim: int) -> LazyTensor:
    """Mark dimension ``dim`` of the input ``t`` (device data) as one whose size
    varies from step to step: barriers pad it to a bucket size
    (``LAZYCORE_BUCKETS``) and mask what the padding would change, so sizes in
    one bucket share one program (:mod:`lazycore.runtime.buckets`). Returns ``t``."""
    if not isinstance(t, LazyTensor):
        raise TypeError(f"dynamic expects a LazyTensor, got {type(t).__name__}")
    rank = t.type.rank
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"dynamic: dim must be an integer, got {type(dim).__name__}")
    if not -rank <= dim < rank:
        raise IndexError(f"dynamic: dim {dim} is out of range for a tensor of rank {rank}")
    node = t._value.node
    if _buckets.padded_along(node, dim % rank):
        return t  # a padded upload's value (DeviceLoader(dynamic=...)): marked already
    if type(node) is not Data:
        raise ValueError(
            "dynamic marks a dimension of an input (device data); this value is still a computation: "
            "mark the input it is computed from, or run mark_step() first"
        )
    _buckets.mark(node, int(dim) % rank)
    return t


EAGER = _eager_core.install(_sys.modules[__name__], ("apply",))
"""``apply`` run at once while the eager mode is on (LAZYCORE_EAGER)."""
