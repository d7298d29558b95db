"""``lazycore.export``: what a function traces, as a StableHLO portable artifact.

Like ``jax.export`` and PyTorch/XLA's ``get_stablehlo``: the program a
function's lazy ops record, lowered by the default pipeline and serialized at
jaxlib's StableHLO version, with its calling convention, for any StableHLO
consumer (jaxlib's PJRT client, IREE, a serving runtime) to run without
lazycore::

    exported = lazycore.export(f, x, w)     # x, w: lazy values of any frontend
    exported.artifact                       # bytes: the portable artifact
    exported.args, exported.results         # order, shapes, dtypes, donations
    print(exported.mlir_text)               # the StableHLO, to read

How the trace is made and what the program holds:

* ``fn`` gets, for each example argument, a new lazy object of the example's
  frontend (a lazy torch tensor, a ``lazycore.numpy`` array, a core handle:
  :mod:`lazycore.trace.protocol`) of its shape and dtype whose value is the
  program's parameter. The example's value is never read; ``fn`` must not
  read any value that depends on its arguments either (``.item()``,
  ``.cpu()``, printing, a host fallback): that raises :class:`ExportError`
  at the line doing it, as would a barrier (``mark_step``) inside ``fn``.
* ``fn`` returns one lazy value or a tuple/list of them (of any frontend);
  they are the program's first results, in order. An argument ``fn`` updated
  in place adds a result after them, its new value; the flag of each value
  check recorded (:mod:`lazycore.runtime.checks`) adds one after those.
* Other values ``fn`` reads (a module's weights, closed-over arrays) and
  Python numbers are baked into the program as constants, with their values
  at the time of the export. Updating such a value in place raises
  :class:`ExportError` (and leaves it unchanged): it would be a hidden result.
  So does drawing random numbers from a generator that is not an argument
  (torch's, a ``lazycore.numpy`` Generator): the program would draw the same
  numbers at every call.
* ``donate_argnums``: arguments whose buffers the program may reuse (XLA's
  input/output aliasing: ``tf.aliasing_output`` on the argument), each for
  its own new value if ``fn`` updated it, else for the first result of its
  type not taken.
* ``dynamic``: dimensions of the arguments that are symbols (``{0: {0: "b"}}``,
  or by parameter name): the program has ``?`` there and runs at every size
  of them (:mod:`lazycore.observe.export_symbolic`); ``fn`` is traced at
  several sizes for that.

The argument objects exist only for the trace: reading one afterwards, or a
value computed from one, raises :class:`~lazycore.BarrierError`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import numpy as np

from lazycore.dialect.types import TensorType, to_numpy_dtype
from lazycore.ir import events, sourceloc
from lazycore.ir.context import TRACE
from lazycore.ir.sourceloc import format_location
from lazycore.ir.failure import BarrierError, Failure
from lazycore.ir.graph import Data, Scalar, Value
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import checks, failures, hostcopy, pjrt
from lazycore.runtime import device as _device
from lazycore.ir.walk import Walk
from lazycore.observe import export_symbolic
from lazycore.trace import core
from lazycore.trace.protocol import handle_of, is_lazy, wrap_like

__all__ = ["Arg", "ExportError", "Exported", "Result", "export"]


class ExportError(RuntimeError):
    """A function cannot be exported as it is: it read a value while traced,
    ran a barrier, or updated a value it was not given as an argument."""


class _Typed:
    """``shape`` and NumPy ``dtype`` of a ``type`` (a :class:`TensorType`);
    with symbolic dimensions (``dims``), the shape names them (``("b", 5)``,
    ``("2*b", 3)``) and ``type`` is the one at the examples' sizes."""

    @property
    def shape(self) -> tuple:
        if self.dims is None:
            return self.type.shape
        return tuple(d if isinstance(d, int) else str(d) for d in self.dims)

    @property
    def type_text(self) -> str:
        """The type, a symbolic dimension as its expression (``tensor<bx5xf32>``)."""
        if self.dims is None:
            return str(self.type)
        dims = (d if isinstance(d, int) or d.isidentifier() else f"({d})" for d in self.shape)
        return "tensor<" + "".join(f"{d}x" for d in dims) + f"{self.type.dtype}>"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(to_numpy_dtype(self.type.dtype))


@dataclass(frozen=True)
class Arg(_Typed):
    """One parameter of the exported program, in the order ``fn`` takes them."""

    index: int
    type: TensorType
    donated_to: int | None = None
    """The result whose buffer this argument's may become; None: not donated."""
    dims: tuple | None = None
    """Per dimension, an int or a symbolic size (a polynomial of the symbols);
    None: the program's shape is ``type``'s."""


@dataclass(frozen=True)
class Result(_Typed):
    """One result of the exported program, in order.

    ``kind``: ``"result"`` (what ``fn`` returned, in its order; these come
    first), ``"update"`` (the new value of argument ``arg``, which ``fn`` updated in
    place) or ``"check"`` (an i1 flag: true where eager would have raised
    ``error`` with ``message``, :mod:`lazycore.runtime.checks`)."""

    index: int
    """The position among the program's results."""
    type: TensorType
    kind: str = "result"
    arg: int | None = None
    message: str | None = None
    error: str | None = None
    dims: tuple | None = None
    """As :attr:`Arg.dims`."""


@dataclass(frozen=True)
class Exported:
    """A traced function as a StableHLO portable artifact and its calling convention."""

    name: str
    """``fn``'s name."""
    artifact: bytes = field(repr=False)
    """The StableHLO module, serialized as a portable artifact (versioned MLIR
    bytecode) at :attr:`stablehlo_version`; entry function ``@main``."""
    stablehlo_version: str
    args: tuple[Arg, ...]
    results: tuple[Result, ...]
    mlir_text: str = field(repr=False)
    """The StableHLO module as text (no locations; the artifact keeps them)."""
    lazy_text: str = field(repr=False)
    """The ``lazy``-dialect module the trace made, before the pass pipeline
    (with symbolic dimensions: the first trace's, at static sizes)."""
    platform: str = "cpu"
    """The platform of the examples' device (the program holds nothing else of it)."""
    symbols: tuple[str, ...] = ()
    """The symbolic dimensions' names (``dynamic=``); empty: every shape is static."""

    @property
    def donations(self) -> dict[int, int]:
        """Argument index -> result index its buffer may be reused for."""
        return {a.index: a.donated_to for a in self.args if a.donated_to is not None}

    def calling_convention(self) -> dict:
        """The calling convention as plain data (JSON-ready), for a consumer in
        another process or language; with symbolic dimensions, ``symbols``
        names them and a shape holds each one's expression (``"2*b"``)."""
        out = {
            "name": self.name,
            "entry": "main",
            "stablehlo_version": self.stablehlo_version,
            "platform": self.platform,
            "args": [{"index": a.index, "shape": list(a.shape), "dtype": a.dtype.name, "donated_to": a.donated_to}
                     for a in self.args],
            "results": [{"index": r.index, "shape": list(r.shape), "dtype": r.dtype.name, "kind": r.kind,
                         "arg": r.arg, "message": r.message, "error": r.error} for r in self.results],
        }
        if self.symbols:
            out["symbols"] = list(self.symbols)
        return out

    def __str__(self) -> str:
        lines = [f"lazycore.export of {self.name}: StableHLO {self.stablehlo_version}, {len(self.artifact)} bytes"]
        for a in self.args:
            donated = "" if a.donated_to is None else f", donated to result {a.donated_to}"
            lines.append(f"  arg {a.index}: {a.type_text}{donated}")
        for r in self.results:
            what = {"result": f"returned by {self.name}", "update": f"the new value of arg {r.arg}",
                    "check": f"a check, true for {r.error}: {r.message}"}[r.kind]
            lines.append(f"  result {r.index}: {r.type_text}, {what}")
        return "\n".join(lines)

    def call(self, *arrays) -> list[np.ndarray]:
        """Run the artifact with lazycore's PJRT client on host arrays (anything
        ``np.asarray`` takes, of the arguments' types); the results as NumPy
        arrays. Compiled on the first call; with symbolic dimensions, at the
        first call of each size (:func:`lazycore.observe.export_symbolic.call`)."""
        if self.symbols:
            return export_symbolic.call(self, arrays)
        exe = self.__dict__.get("_executable")
        if exe is None:
            exe = pjrt.compile_artifact(self.artifact, [a.type for a in self.args], [r.type for r in self.results])
            object.__setattr__(self, "_executable", exe)
        if len(arrays) != len(self.args):
            raise TypeError(f"{self.name} takes {len(self.args)} arguments, got {len(arrays)}")
        return exe.run_numpy([np.asarray(a, dtype=arg.dtype) for a, arg in zip(arrays, self.args)])


def export(fn, *example_args, donate_argnums=(), dynamic=None) -> Exported:
    """Trace ``fn`` on arguments like ``example_args`` and export the program
    (see the module docstring). ``dynamic``: dimensions of the arguments that
    are symbolic, one program for every size of them
    (:mod:`lazycore.observe.export_symbolic`)."""
    name = getattr(fn, "__name__", type(fn).__name__)
    handles = []
    for i, x in enumerate(example_args):
        if not is_lazy(x):
            raise TypeError(
                f"lazycore.export: argument {i} of {name} is a {type(x).__name__}; examples are lazy values "
                "(a lazy torch tensor, a lazycore.numpy array, a lazycore handle)"
            )
        handles.append(handle_of(x))
    devices = {h.device for h in handles}
    if len(devices) > 1:
        raise ValueError(f"lazycore.export: the examples of {name} are on several devices: "
                         + ", ".join(sorted(d.name for d in devices)))
    device = devices.pop() if devices else _device.default_device()
    donated = _donated(donate_argnums, len(handles), name)
    types = [h.type for h in handles]
    if dynamic is not None:
        symbols = export_symbolic.parse_dynamic(dynamic, fn, types, name)
        if symbols:
            return _export_symbolic(fn, example_args, types, device, donated, symbols, name)
    return finish(name, device, trace(fn, example_args, types, device, donated, name))


def _export_symbolic(fn, example_args, types, device, donated, symbols, name: str) -> Exported:
    """One program for every size of ``symbols``: ``fn`` traced at several
    sizes, the programs generalized (:mod:`lazycore.observe.export_symbolic`)."""
    points, at = export_symbolic.points_of(symbols, types)
    traces = []
    for point, point_types in zip(points, at):
        try:
            with TRACE.symbolic_sizes():  # (lowerings take forms whose structure no size changes)
                traces.append(trace(fn, example_args, point_types, device, donated, name))
        except ExportError:
            raise
        except Exception as e:
            raise ExportError(f"lazycore.export: {name} fails when traced at {export_symbolic.sizes_text(point)} "
                              f"(lazycore traces it at {export_symbolic.LOW}, {export_symbolic.HIGH} and "
                              f"{export_symbolic.CHECK} times the examples' sizes): {e}") from e
    try:
        arg_dims, res_dims = export_symbolic.generalize([t.module for t in traces], points, symbols)
    except export_symbolic.symbolic_error() as e:
        raise ExportError(f"lazycore.export: {name} has no program with symbolic dimensions "
                          f"({', '.join(sorted(symbols))}): {e}") from e
    example = export_symbolic.example_sizes(symbols, types)
    at_sizes, dims = export_symbolic.at_sizes, export_symbolic.symbolic_dims
    base = traces[0]
    args = tuple(Arg(a.index, at_sizes(a.type, d, example), a.donated_to, dims(d))
                 for a, d in zip(base.args, arg_dims))
    results = tuple(Result(r.index, at_sizes(r.type, d, example), r.kind, r.arg, r.message, r.error, dims(d))
                    for r, d in zip(base.results, res_dims))
    return finish(name, device, Traced(base.module, base.lazy_text, args, results), symbols=tuple(symbols))


@dataclass
class Traced:
    """One trace of ``fn``, lowered to StableHLO: the module and its calling convention."""

    module: object
    """The StableHLO module (an ``ir.Module``, with locations)."""
    lazy_text: str
    args: tuple[Arg, ...]
    results: tuple[Result, ...]


def trace(fn, example_args, types, device, donated, name: str) -> Traced:
    """Trace ``fn`` on new lazy objects of the examples' frontends with
    ``types`` (the examples' own, or others of the same ranks) and lower the
    program to StableHLO."""
    # values that exist before the trace: fn must not update them (checked after)
    before = {id(h): (h, h.value) for h in device.arena.live()}
    leaves = [_argument_leaf(t, i, name) for i, t in enumerate(types)]
    inputs = [wrap_like(x, LazyTensor(Value(leaf, 0), device)) for x, leaf in zip(example_args, leaves)]
    try:
        # no automatic step cut and no eager-mode run of each op inside: the trace is one program
        # (under lazycore.config.eager() every op ran its results: "ran a barrier")
        with _no_reads(name), TRACE.cuts_held():
            try:
                out = fn(*inputs)
            except BarrierError as e:
                if e.stage != "export":
                    raise
                raise ExportError(f"lazycore.export: {e} (at {_user_line(e)})") from e
        values, updates = _outputs(out, inputs, leaves, name)
        walk = Walk(values + list(updates.values()))
        _refuse_hidden_random_state(walk, leaves, name)
    finally:
        # whatever happened, values from before the trace keep their values
        hidden = _undo_updates(before, device)
        for i, leaf in enumerate(leaves):
            failures.mark(leaf, Failure(f"argument {i} of lazycore.export's trace of {name}: it has no value "
                                        "outside that trace", None, None, "export", None))
    if hidden:
        raise ExportError(f"lazycore.export: {name} updated {len(hidden)} value(s) in place that it was not given "
                          f"as arguments ({', '.join(hidden[:4])}{', ...' if len(hidden) > 4 else ''}: a module's "
                          "buffers such as batch norm statistics, an optimizer's state): pass them as arguments, or "
                          "trace a function that does not update them; they are left as they were")
    return _build(name, walk, leaves, values, updates, donated)


def finish(name: str, device, traced: Traced, **extra) -> Exported:
    """The traced module as an :class:`Exported` (``extra``: its further fields)."""
    from lazycore.runtime import compiler  # the first MLIR use

    module = traced.module
    artifact, _, _ = compiler.stablehlo_artifact(module)
    with module.context:
        mlir_text = module.operation.get_asm()
    return Exported(name, artifact, pjrt.consumer_stablehlo_version(), traced.args, traced.results, mlir_text,
                    traced.lazy_text, device.platform, **extra)


def _user_line(error: BaseException) -> str:
    """file:line of the innermost user frame ``error`` passed through."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not sourceloc.is_library(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "an unknown line"


def _donated(argnums, count: int, name: str) -> list[int]:
    argnums = [argnums] if isinstance(argnums, int) else list(argnums)
    for i in argnums:
        if not isinstance(i, int) or not -count <= i < count:
            raise ValueError(f"lazycore.export: donate_argnums names argument {i!r}; {name} takes {count}")
    return sorted({i % count for i in argnums})


def _argument_leaf(t: TensorType, i: int, name: str) -> Data:
    # No buffer: the trace needs types only, and a read of an argument is an
    # error (the value says so).
    leaf = Data(None, t, owned=False)
    failures.mark(leaf, Failure(f"{name} read argument {i}, which has no value while lazycore.export traces it: an "
                                "exported program cannot depend on the values of its arguments",
                                None, None, "export", None))
    return leaf


class _no_reads:
    """While ``fn`` is traced: a read of a pending value or a barrier raises
    :class:`ExportError` at the user's line (the values are parameters; a
    barrier would also run the trace's own pending values)."""

    def __init__(self, name: str):
        self.name = name

    def read(self, t):
        raise ExportError(f"lazycore.export: {self.name} read the value of a lazy {t} at "
                          f"{sourceloc.user_location()} (.item(), .cpu(), printing, a conversion to NumPy or an op "
                          "that runs on the host); an exported program cannot depend on values")

    def barrier(self, device):
        raise ExportError(f"lazycore.export: {self.name} ran a barrier (mark_step) at {sourceloc.user_location()}; "
                          "an exported program is one step")

    def __enter__(self):
        events.listen("implicit_barrier", self.read)
        events.listen("barrier_start", self.barrier)

    def __exit__(self, *exc):
        events.unlisten("implicit_barrier", self.read)
        events.unlisten("barrier_start", self.barrier)


def _outputs(out, inputs, leaves, name: str) -> tuple[list[Value], dict[int, Value]]:
    """``fn``'s results as values, and the new value of each argument it updated."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    values = []
    for j, r in enumerate(items):
        if not is_lazy(r):
            where = "" if len(items) == 1 and not isinstance(out, (tuple, list)) else f" {j}"
            raise TypeError(f"lazycore.export: result{where} of {name} is a {type(r).__name__}, not a lazy value")
        values.append(handle_of(r).value)
    updates = {}
    for i, (x, leaf) in enumerate(zip(inputs, leaves)):
        now = handle_of(x).value
        if now.node is not leaf:
            updates[i] = now
    return values, updates


def _undo_updates(before: dict, device) -> list[str]:
    """Give the values from before the trace that ``fn`` updated in place
    their old values back; the types of those it updated."""
    changed = [(h, old) for h, old in before.values() if h.value is not old]
    for h, old in changed:
        core.assign(h, LazyTensor(old, device))
    return [str(h.type) for h, _ in changed]


def _refuse_hidden_random_state(walk, leaves, name: str) -> None:
    """A random draw whose generator state is not an argument would be baked
    into the program: it would draw the same numbers at every call."""
    params = {id(leaf) for leaf in leaves}
    for node in walk.order:
        if node.op != "rng_bit_generator":
            continue
        state = node.operands[0].node
        while state.op == "rng_bit_generator":
            state = state.operands[0].node
        if state.is_leaf and id(state) not in params:
            where = format_location(node.loc) if node.loc is not None else "an unknown line"
            raise ExportError(f"lazycore.export: {name} draws random numbers (at {where}) from a generator that is "
                              "not an argument: its state would be a constant of the program, which would draw the "
                              "same numbers at every call (model.eval() turns dropout off)")


def _constant(leaf, name: str):
    if type(leaf) is Scalar:
        return np.asarray(leaf.value, dtype=to_numpy_dtype(leaf.types[0].dtype))
    if type(leaf.buffer) is Failure:
        raise leaf.buffer.error()
    return hostcopy.to_host(leaf.buffer, leaf.types[0], copy=False)


@dataclass
class _ExportWalk:
    """A walk whose parameters are the arguments in ``fn``'s order (used or
    not), every other leaf being a constant (``compiler.build_module``)."""

    outputs: list
    order: list
    data: list
    packs: dict = field(default_factory=dict)


def _build(name, walk, leaves, values, updates, donated) -> Traced:
    from lazycore.runtime import compiler  # the first MLIR use

    outputs = walk.outputs
    params = {id(leaf) for leaf in leaves}
    constants = {id(n): _constant(n, name) for n in walk.params if id(n) not in params}
    ewalk = _ExportWalk(outputs, walk.order, list(leaves))
    results = [Result(j, v.node.types[v.index]) for j, v in enumerate(values)]
    results += [Result(len(results) + k, v.node.types[v.index], "update", arg=i)
                for k, (i, v) in enumerate(updates.items())]
    flags = [(n, v) for n, v, _ in checks.entries(walk)]
    results += [Result(len(results) + k, v.node.types[v.index], "check", message=n.attrs["message"],
                       error=n.attrs["error"]) for k, (n, v) in enumerate(flags)]
    plan = _plan(donated, leaves, results, name)
    module = compiler.build_module(ewalk, constants=constants)
    with module.context:
        lazy_text = module.operation.get_asm()
    compiler.lower(module, donate=plan)
    args = tuple(Arg(i, leaf.types[0], plan.get(i)) for i, leaf in enumerate(leaves))
    return Traced(module, lazy_text, args, tuple(results))


def _plan(donated: list[int], leaves, results: list[Result], name: str) -> dict[int, int]:
    plan: dict[int, int] = {}
    taken = set()
    for i in donated:  # first to its own update
        for j, r in enumerate(results):
            if r.kind == "update" and r.arg == i:
                plan[i] = j
                taken.add(j)
    for i in donated:
        if i in plan:
            continue
        t = leaves[i].types[0]
        j = next((j for j, r in enumerate(results) if j not in taken and r.kind != "check" and r.type == t), None)
        if j is None:
            raise ValueError(f"lazycore.export: argument {i} of {name} is donated, but no result of {name} has its "
                             f"type {t} (or each one is taken)")
        plan[i] = j
        taken.add(j)
    return plan
