"""The ``lazy`` dialect, generated from the op table.

For every :class:`~lazycore.dialect.spec.OpSpec` this module makes one
Python-defined MLIR op (``dialects.ext``, registered through IRDL) whose
verifier runs the op's own shape rule, so the builder, the verifier and the
runtime's shape inference can never disagree.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .barrier import MAX_OPERANDS as MAX_BARRIER_OPERANDS
from .mlir import ext, ir, stablehlo
from .spec import OPS, OpSpec
from .types import FLOAT8_DTYPES, ShapeError, TensorType, from_numpy_dtype, to_numpy_dtype

_FLOAT8_NUMPY = {to_numpy_dtype(d) for d in FLOAT8_DTYPES}


class Lazy(ext.Dialect, name="lazy"):
    """Framework-neutral tensor ops recorded by lazycore frontends."""


# --- types -------------------------------------------------------------------


def tensor_type(t: TensorType) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(t.shape), ir.Type.parse(t.dtype))


def from_mlir_type(t: ir.Type) -> TensorType:
    if not isinstance(t, ir.RankedTensorType):
        try:
            t = ir.RankedTensorType(t)
        except ValueError:
            raise ShapeError(f"expected a ranked tensor type, got {t}") from None
    return TensorType(tuple(t.shape), element_name(t.element_type))


# Printing a type costs ~5 us, and verifiers and passes ask for every operand's
# type; the common element types are named from their class instead.
_FLOAT_NAMES = {ir.F16Type: "f16", ir.BF16Type: "bf16", ir.F32Type: "f32", ir.F64Type: "f64"}


def element_name(et: ir.Type) -> str:
    """An element type's name as MLIR prints it (``f32``, ``i64``, ``ui8``, ``i1``)."""
    name = _FLOAT_NAMES.get(type(et))
    if name is not None:
        return name
    if type(et) is ir.IntegerType:
        return f"{'i' if et.is_signless else 'ui' if et.is_unsigned else 'si'}{et.width}"
    return str(et)


# --- attributes ----------------------------------------------------------------


class DenseInfo:
    """A dense constant whose values NumPy cannot hold (e.g. bf16): type only."""

    def __init__(self, t: TensorType):
        self.shape, self.dtype_name = t.shape, t.dtype

    @property
    def dtype(self):
        return to_numpy_dtype(self.dtype_name)


def attr_to_mlir(kind: str, value: Any) -> ir.Attribute:
    if kind == "i64":
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
    if kind == "i64[]":
        return ir.DenseI64ArrayAttr.get([int(v) for v in value])
    if kind == "f64":
        return ir.FloatAttr.get(ir.F64Type.get(), float(value))
    if kind == "bool":
        return ir.BoolAttr.get(bool(value))
    if kind == "str":
        return ir.StringAttr.get(str(value))
    if kind == "dense":
        array = np.asarray(value)
        CONTEXTS.charge(array.nbytes)
        return _dense(array, tensor_type(TensorType(tuple(array.shape), from_numpy_dtype(array.dtype))))
    raise ValueError(f"unknown attribute kind '{kind}'")


def splat_to_mlir(value: Any, t: TensorType) -> ir.Attribute:
    """A dense attribute of type ``t`` whose every element is ``value`` (converted
    as NumPy converts it to ``t``'s element type), built from one element: a
    full-size array of a large splat (a (512, 50257) float32 constant in a
    cross-entropy's lowering) took ~15 ms of NumPy and hashing per constant."""
    one = np.full((1,), value, dtype=to_numpy_dtype(t.dtype))
    CONTEXTS.charge(one.nbytes)
    return _dense(one, tensor_type(t))


def _dense(array: np.ndarray, t) -> ir.Attribute:
    """``array``'s elements as a dense attribute of type ``t`` (one element: a splat)."""
    if array.dtype == to_numpy_dtype("bf16"):
        # The buffer protocol does not know bf16: hand over the raw bits.
        return ir.DenseElementsAttr.get(np.ascontiguousarray(array).view(np.uint16), type=t)
    if array.dtype in _FLOAT8_NUMPY:  # nor float8
        return ir.DenseElementsAttr.get(np.ascontiguousarray(array).view(np.uint8), type=t)
    return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=t)


def attr_from_mlir(kind: str, attr: ir.Attribute) -> Any:
    """The Python value of an attribute; ShapeError if it is of the wrong kind."""
    try:
        if kind == "i64":
            a = ir.IntegerAttr(attr)
            if a.type != ir.IntegerType.get_signless(64):
                raise ValueError
            return a.value
        if kind == "i64[]":
            return tuple(ir.DenseI64ArrayAttr(attr))
        if kind == "f64":
            return ir.FloatAttr(attr).value
        if kind == "bool":
            return ir.BoolAttr(attr).value
        if kind == "str":
            return ir.StringAttr(attr).value
        if kind == "dense":
            dense = ir.DenseElementsAttr(attr)
            t = from_mlir_type(dense.type)
            if t.dtype == "bf16" or t.dtype in FLOAT8_DTYPES:
                return DenseInfo(t)
            return np.array(dense).reshape(t.shape)
    except (ValueError, TypeError):
        pass
    expected = {
        "i64": "a 64-bit integer attribute",
        "i64[]": "a DenseI64ArrayAttr (array<i64: ...>)",
        "f64": "an f64 float attribute",
        "bool": "a bool attribute",
        "str": "a string attribute",
        "dense": "a dense elements attribute",
    }[kind]
    raise ShapeError(f"expected {expected}, got {attr}")


def attr(op, name: str) -> Any:
    """The Python value of attribute ``name`` of a ``lazy`` op.

    The kind comes from the op table, so lowerings and patterns read every
    attribute the same way the verifier does.
    """
    operation = op.operation
    return attr_from_mlir(OPS[operation.name].attrs[name], operation.attributes[name])


# --- op classes ----------------------------------------------------------------


def rule_inputs(spec: OpSpec, operation) -> tuple[list, dict]:
    """Operand types (variadic group as a list) and rule kwargs of an op."""
    types = [from_mlir_type(v.type) for v in operation.operands]
    if spec.variadic:
        # IRDL keeps a segment-size attribute; with one variadic group and
        # fixed operands around it the split is recoverable from counts.
        names = spec.operands
        i = [n.endswith("*") for n in names].index(True)
        n_fixed_after = len(names) - i - 1
        end = len(types) - n_fixed_after
        types = types[:i] + [types[i:end]] + types[end:]
    kwargs = {}
    for name, kind in spec.attrs.items():
        if name not in operation.attributes:
            raise ShapeError(f"requires attribute '{name}'")
        try:
            try:
                value = operation.attributes[name]
            except TypeError:  # a complex dense attribute: the bindings cannot cast it
                raise ShapeError("unreadable attribute (complex constants are lazy.complex of two real ones)") from None
            kwargs[name] = attr_from_mlir(kind, value)
        except ShapeError as e:
            raise ShapeError(f"attribute '{name}': {e}") from None
    if spec.result_params:
        idx = spec.results.index(spec.params_from) if spec.params_from else 0
        rt = from_mlir_type(operation.results[idx].type)
        for p in spec.result_params:
            kwargs[p] = rt.shape if p == "shape" else rt.dtype
    return types, kwargs


def _operand_count_problem(spec: OpSpec, count: int) -> str | None:
    """The rule takes its operands positionally: count them before calling it."""
    fixed = len(spec.operands) - (1 if spec.variadic else 0)
    names = f" ({', '.join(o.replace('*', '...') for o in spec.operands)})" if spec.operands else ""
    if spec.variadic is None and count != fixed:
        return f"expected {fixed} operand{'s' * (fixed != 1)}{names}, got {count}"
    if spec.variadic is not None and count < fixed:
        return f"expected at least {fixed} operand{'s' * (fixed != 1)}{names}, got {count}"
    return None


def verify(spec: OpSpec, operation) -> str | None:
    """None if ``operation`` follows its rule, else the broken rule."""
    problem = _operand_count_problem(spec, len(operation.operands))
    if problem is not None:
        return problem
    try:
        types, kwargs = rule_inputs(spec, operation)
        expected = spec.infer(*types, **kwargs)
    except ShapeError as e:
        return str(e)
    actual = [from_mlir_type(r.type) for r in operation.results]
    if len(actual) != len(expected):
        return f"expected {len(expected)} results, got {len(actual)}"
    names = spec.results if not spec.results[-1:] or not spec.results[-1].endswith("*") else (
        [f"{spec.results[-1][:-1]} #{i}" for i in range(len(actual))])
    for name, want, got in zip(names, expected, actual):
        if want != got:
            return f"result '{name}' has type {got}, but the operands and attributes give {want}"
    return None


# Ops whose variadic group holds values of different types, and their largest
# group. IRDL checks every value of a variadic group against one constraint
# variable, which binds to the first value's type; so such a group is declared
# as that many optional operands (and results), each with its own variable,
# and ``create`` fills the first ones (``operandSegmentSizes`` says which).
MIXED_GROUPS = {"optimization_barrier": MAX_BARRIER_OPERANDS}


def _make_op_class(spec: OpSpec):
    annotations: dict[str, Any] = {}
    for name in spec.operands:
        if name.endswith("*") and spec.name in MIXED_GROUPS:
            for i in range(MIXED_GROUPS[spec.name]):
                annotations[f"{name[:-1]}_{i}"] = ext.Operand[ir.RankedTensorType] | None
        elif name.endswith("*"):
            annotations[name[:-1]] = Sequence[ext.Operand[ir.RankedTensorType]]
        else:
            annotations[name] = ext.Operand[ir.RankedTensorType]
    for name in spec.attrs:
        annotations[name] = Any  # kinds are checked by the verifier, with a message
    for name in spec.results:
        if name.endswith("*"):  # a variadic result group (optimization_barrier's)
            for i in range(MIXED_GROUPS[spec.name]):
                annotations[f"{name[:-1]}_{i}"] = ext.Result[ir.RankedTensorType] | None
        else:
            annotations[name] = ext.Result[ir.RankedTensorType]

    def verify_invariants(self):
        problem = verify(spec, self.operation)
        if problem is None:
            return True
        self.operation.location.emit_error(f"'{spec.full_name}' op {problem}")
        return False

    cls_name = "".join(p.capitalize() for p in spec.name.split("_")) + "Op"
    namespace = {
        "__annotations__": annotations,
        "__doc__": spec.summary or (spec.rule.__doc__ or ""),
        "verify_invariants": verify_invariants,
        "SPEC": spec,
    }
    traits = [ext.Pure] if spec.pure else []
    return type(cls_name, (Lazy.Operation,), namespace, name=spec.name, traits=traits)


OP_CLASSES: dict[str, type] = {}


def generate_op_classes() -> None:
    """Make the op class of every table row not yet made (idempotent)."""
    for full_name, spec in OPS.items():
        if full_name not in OP_CLASSES:
            OP_CLASSES[full_name] = _make_op_class(spec)


def load(ctx: ir.Context) -> None:
    """Load the ``lazy`` dialect into the current context."""
    generate_op_classes()
    Lazy.load()


_CONTEXT_LOCK = threading.RLock()


def new_context() -> ir.Context:
    """A fresh MLIR context with StableHLO and the ``lazy`` dialect loaded.

    Loading ``lazy`` (``dialects.ext``) emits its IRDL module into class
    attributes and re-registers the op classes process-wide: two threads
    doing it at once define its symbols twice, or swap registrations under a
    pass that runs in another context (a segfault). So a context is made under
    this module's own lock, and the runtime builds and compiles every module
    under :data:`lazycore.ir.context.LOCK`, which it takes before this one
    (:mod:`lazycore.runtime.compiler`; docs/threads.md). The compiler half may
    not import the graph layer, hence two locks, always taken in that order."""
    with _CONTEXT_LOCK:
        ctx = ir.Context()
        stablehlo.register_dialect(ctx)
        with ctx, ir.Location.unknown():
            load(ctx)
    return ctx


class _Entry:
    __slots__ = ("ctx", "ops", "epoch", "programs", "constant_bytes")

    def __init__(self, ctx: ir.Context, ops: int, epoch: int):
        self.ctx, self.ops, self.epoch = ctx, ops, epoch
        self.programs = self.constant_bytes = 0


class ContextPool:
    """Ready contexts (:func:`new_context`) for the compiler's builds, lent to
    one user at a time and taken back.

    Making a context costs ~17-22 ms of CPU (loading ``lazy`` emits and
    canonicalizes its IRDL module), as much as lowering a small program, and
    every barrier's program used to make one. An MLIR context interns every
    attribute and type it sees for its whole life, dense constants included,
    so a context is dropped, not lent again, once it has served ``programs``
    builds or interned ``constant_bytes`` of dense constants (both counted by
    whoever holds it: :meth:`lend`, :func:`attr_to_mlir`). It is dropped too
    when the user's build failed (a half-built module, and whatever a user
    lowering did to the context, stay out of the next build), when ops were
    defined since it loaded ``lazy`` (:func:`~lazycore.dialect.spec.define`:
    its IRDL module would lack them), and by :meth:`clear`. A dropped context
    lives on while modules made in it do (they hold it). The bindings make
    contexts without MLIR's own locking, so a lent context and the modules
    made in it are used only under :data:`lazycore.ir.context.LOCK`, for the
    one compile it is lent to (:mod:`lazycore.runtime.compiler`); modules
    handed to a caller get a context of their own. The pool's lists are
    guarded by :data:`_CONTEXT_LOCK` (a nested compile is lent a second
    context)."""

    def __init__(self, size: int = 2, programs: int = 200, constant_bytes: int = 64 << 20):
        self.size, self.programs, self.constant_bytes = size, programs, constant_bytes
        self._free: list[_Entry] = []
        self._lent: list[_Entry] = []
        self._epoch = 0
        self.made = 0  # contexts made for lending, for tests and the memo report

    def __len__(self) -> int:
        return len(self._free)

    def clear(self) -> None:
        """Drop the ready contexts; those lent now are dropped when given back."""
        with _CONTEXT_LOCK:
            self._free.clear()
            self._epoch += 1

    def release_at_exit(self) -> None:
        """:meth:`clear` at interpreter exit (atexit), unless a thread holds
        the pool's lock then (waiting for it could hang the exit). Destroying
        contexts takes a while; left to module teardown, it runs after Python
        started finalizing, a window in which a daemon thread coming back from
        native code (a collective left to the process's end,
        :mod:`lazycore.runtime.peers`) is ended by ``pthread_exit`` inside
        C++ frames: "FATAL: exception not rethrown", SIGABRT."""
        if _CONTEXT_LOCK.acquire(blocking=False):
            try:
                self._free.clear()
                self._epoch += 1
            finally:
                _CONTEXT_LOCK.release()

    def charge(self, nbytes: int) -> None:
        """Count ``nbytes`` of dense constants against the contexts lent now."""
        for e in self._lent:
            e.constant_bytes += nbytes

    def _take(self) -> _Entry:
        with _CONTEXT_LOCK:
            generate_op_classes()
            ops = len(OP_CLASSES)
            while self._free:
                e = self._free.pop()
                if e.ops == ops and e.epoch == self._epoch:
                    break
            else:
                e = _Entry(new_context(), ops, self._epoch)
                self.made += 1
            self._lent.append(e)
            return e

    def _give_back(self, e: _Entry, ok: bool) -> None:
        with _CONTEXT_LOCK:
            self._lent.remove(e)
            e.programs += 1
            if (ok and e.epoch == self._epoch and e.ops == len(OP_CLASSES) and len(self._free) < self.size
                    and e.programs < self.programs and e.constant_bytes < self.constant_bytes):
                self._free.append(e)

    @contextlib.contextmanager
    def lend(self):
        """A ready context for one build; given back at the end, dropped if
        the block raised."""
        e = self._take()
        ok = False
        try:
            yield e.ctx
            ok = True
        finally:
            self._give_back(e, ok)


CONTEXTS = ContextPool()
"""The compiler's contexts (:mod:`lazycore.runtime.compiler`, which registers
it with the caches: ``mlir.contexts``); ``lazy-opt`` and the tools make their own."""
atexit.register(CONTEXTS.release_at_exit)


# --- building ops ----------------------------------------------------------------


def _complex_constant(value: np.ndarray, loc) -> ir.Operation:
    """A complex constant as ``lazy.complex`` of two real constants.

    The bindings cannot hand a complex dense attribute back to Python (the
    cast raises, and in some paths aborts the process), and every pass reads
    constants; so no complex attribute is ever made. XLA folds the pair."""
    parts = [create("constant", value=np.array(p, order="C"), loc=loc).result for p in (value.real, value.imag)]
    return create("complex", *parts, loc=loc)


def create(name: str, *operands, loc=None, **kwargs) -> ir.Operation:
    """Create ``lazy.<name>`` at the current insertion point.

    ``operands`` are ``ir.Value`` (a list for a variadic group); ``kwargs``
    hold the attributes as Python values and the result parameters (``shape``,
    ``dtype``) where the op has them. Result types come from the op's rule.
    """
    full = name if name.startswith("lazy.") else f"lazy.{name}"
    if full == "lazy.constant" and np.asarray(kwargs.get("value")).dtype.kind == "c":
        return _complex_constant(np.asarray(kwargs["value"]), loc)
    spec = OPS[full]
    types = [
        [from_mlir_type(v.type) for v in o] if isinstance(o, (list, tuple)) else from_mlir_type(o.type)
        for o in operands
    ]
    results = spec.infer(*types, **kwargs)
    attrs = {k: attr_to_mlir(kind, kwargs[k]) for k, kind in spec.attrs.items()}
    flat = []
    for o in operands:
        flat.extend(o if isinstance(o, (list, tuple)) else [o])
    if spec.name in MIXED_GROUPS:
        slots = [1] * len(flat) + [0] * (MIXED_GROUPS[spec.name] - len(flat))
        attrs["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(slots)
        attrs["resultSegmentSizes"] = ir.DenseI32ArrayAttr.get(slots)
    elif spec.variadic:
        sizes = [len(o) if isinstance(o, (list, tuple)) else 1 for o in operands]
        attrs["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(sizes)
    return ir.Operation.create(
        full,
        results=[tensor_type(r) for r in results],
        operands=flat,
        attributes=attrs,
        loc=loc,
    )
