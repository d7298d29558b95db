"""Look at the pending graph behind some tensors without running anything.

:func:`ir_text` prints the ``lazy``-dialect module a barrier on those tensors
would compile (the same :class:`~lazycore.runtime.barrier.Walk` and
:func:`~lazycore.runtime.compiler.build_module`); :func:`to_dot` draws the graph as
Graphviz, in the style of Figure 1b of the LazyTensor paper: one box per op
(name and result type), device-data leaves (shape, "device data"), scalar
parameters, and the outputs marked; edges run from operand to user.

Both take lazycore handles (:class:`~lazycore.tensor.LazyTensor`), tensors of
the PyTorch frontend (``lazycore.torch``), arrays of the NumPy frontend
(``lazycore.numpy``), any object of the frontend protocol
(``__lazycore_value__()``, :mod:`lazycore.trace.protocol`) or graph values,
one or a list of them. A view is shown
as the ops that read it from its storage, as a barrier would compute it.

IR dumps. With ``LAZYCORE_DUMP_DIR=DIR`` (or ``configure(dump_dir=DIR)``)
every graph a barrier compiles gets a folder ``DIR/<nnnn>-<key>/`` (a running
number and the first hex digits of its compile-cache key) holding

* ``00-input.mlir``: the ``lazy`` module before the pass pipeline,
* ``NN-<pass>.mlir``: the module after each pass of the pipeline, in order,
* ``stablehlo.mlir``: the module handed to XLA,
* ``graph.dot``: the graph as Graphviz (``dot -Tsvg graph.dot``),
* ``info.txt``: device, pipeline (the platform's default where none is
  configured: :func:`lazycore.passes.pipeline.default_for`), donation plan
  and the full key.

Files are written as the pipeline runs, so a pass that fails leaves the
stages before it. MLIR files carry their locations. Cache hits compile
nothing and dump nothing. :mod:`lazycore.testing` captures the same stages
in memory through :data:`OBSERVERS`.
"""

from __future__ import annotations

import os
import re

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.graph import Data, Node, Scalar, Value, operand_values
from lazycore.ir.sourceloc import resolve
from lazycore.ir.walk import Walk
from lazycore.trace.protocol import handle_of

__all__ = ["OBSERVERS", "ir_text", "recording", "to_dot", "values_of", "walk_to_dot"]


def _value_of(x) -> Value:
    if type(x) is Value:
        return x
    return handle_of(x).value


def values_of(tensors) -> list[Value]:
    """The graph values behind one tensor-like object or a list/tuple of them."""
    if isinstance(tensors, (list, tuple)) and type(tensors) is not Value:
        items = list(tensors)
    else:
        items = [tensors]
    if not items:
        raise ValueError("no tensors given")
    return [_value_of(x) for x in items]


def _walk(tensors):
    return Walk(values_of(tensors))


def ir_text(tensors, *, locations: bool = False) -> str:
    """The ``lazy``-dialect module computing ``tensors`` from their inputs.

    Nothing runs and nothing is compiled; the graph stays pending. Entry
    arguments are the device-data leaves in walk order, then one packed
    vector per dtype of scalar parameters (as a barrier passes them).
    ``locations=True`` prints the MLIR locations (the user's source lines).
    """
    from lazycore.runtime.compiler import build_module

    module = build_module(_walk(tensors))
    with module.context:  # printing verifies; the op verifiers need the context
        return module.operation.get_asm(enable_debug_info=locations)


# --- Graphviz -------------------------------------------------------------------


def _quote(text: str) -> str:
    """A DOT quoted string; lines joined by DOT's ``\\n`` escape."""
    lines = [ln.replace("\\", "\\\\").replace('"', '\\"') for ln in str(text).split("\n")]
    return '"' + "\\n".join(lines) + '"'


def _short_type(t) -> str:
    return f"{t.dtype}[{','.join(map(str, t.shape))}]"


def _attr_text(value) -> str:
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value.reshape(-1) if value.ndim > 1 else value, separator=",")
        return f"<{value.dtype}{list(value.shape)}>"
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _node_label(node: Node) -> tuple[str, dict]:
    if type(node) is Data:
        return f"device data\n{_short_type(node.types[0])}", {"shape": "box", "style": "filled",
                                                               "fillcolor": "lightgrey"}
    if type(node) is Scalar:
        return f"scalar parameter\n{node.types[0].dtype} = {node.value}", {"shape": "box", "style": "rounded"}
    lines = [f"lazy.{node.op}"]
    for name, value in node.attrs.items():
        if name == "shape" and node.op != "reshape" and node.op != "broadcast_in_dim":
            continue  # the result type says it
        lines.append(f"{name}={_attr_text(value)}")
    lines.extend(str(t) for t in node.types)
    return "\n".join(lines), {"shape": "ellipse"}


def _loc_text(loc) -> str | None:
    """``file:line`` of a node's recorded location (None when it has none)."""
    loc = resolve(loc)
    return None if loc is None else f"{loc[0]}:{loc[1]}"


def walk_to_dot(walk, name: str = "lazy") -> str:
    """A barrier walk (:class:`~lazycore.runtime.barrier.Walk`) as Graphviz DOT text."""
    ids = {id(n): f"n{i}" for i, n in enumerate(walk.order)}
    out_of: dict[int, list[int]] = {}
    for j, v in enumerate(walk.outputs):
        out_of.setdefault(id(v.node), []).append(j)
    lines = [
        f"digraph {_quote(name)} {{",
        "  rankdir=TB;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    for node in walk.order:
        label, style = _node_label(node)
        if id(node) in out_of:
            style = dict(style, penwidth="2", color="blue")
        loc = _loc_text(getattr(node, "loc", None))
        if loc:
            style["tooltip"] = loc
            label += "\n" + os.path.basename(loc)
        attrs = ", ".join([f"label={_quote(label)}"] + [f"{k}={_quote(v)}" for k, v in style.items()])
        lines.append(f"  {ids[id(node)]} [{attrs}];")
    for node in walk.order:
        if node.is_leaf:
            continue
        flat = operand_values(node)
        for pos, v in enumerate(flat):
            attrs = []
            if len(flat) > 1:
                attrs.append(f"label={_quote(str(pos))}")
            if len(v.node.types) > 1:
                attrs.append(f"taillabel={_quote('#' + str(v.index))}")
            suffix = f" [{', '.join(attrs)}]" if attrs else ""
            lines.append(f"  {ids[id(v.node)]} -> {ids[id(node)]}{suffix};")
    for j, v in enumerate(walk.outputs):
        lines.append(f'  out{j} [label={_quote(f"output {j}")}, shape="plaintext", fontcolor="blue"];')
        tail = f' [taillabel={_quote("#" + str(v.index))}]' if len(v.node.types) > 1 else ""
        lines.append(f"  {ids[id(v.node)]} -> out{j}{tail};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_dot(tensors, name: str = "lazy") -> str:
    """The pending graph behind ``tensors`` as Graphviz DOT text (nothing runs)."""
    return walk_to_dot(_walk(tensors), name)


# --- recording what a barrier compiles ---------------------------------------------

OBSERVERS: list = []
"""Objects told about every compile: ``begin(walk, module_text_fn)`` returns a
per-compile sink with ``stage(name, text_fn)`` and ``end()`` (or None).
``text_fn(locations)`` prints the module; see :mod:`lazycore.testing`."""


def recording(walk, module, device, donate: dict, pipeline: str):
    """The recorder of one compile, or None when neither dumps nor observers are on.

    It listens to the runtime's ``lowering`` event: the compiler calls
    ``rec.after_pass`` after every stage and ``rec.finish`` with the StableHLO.
    """
    if not settings.dump_dir and not OBSERVERS:
        return None
    return _Recording(walk, module, device, donate, pipeline)


def _printer(op):
    cache: dict[bool, str] = {}

    def text(locations: bool) -> str:
        if locations not in cache:
            with op.context:
                cache[locations] = op.get_asm(enable_debug_info=locations)
        return cache[locations]

    return text


class _Recording:
    def __init__(self, walk, module, device, donate, pipeline):
        self.sinks = [s for s in (o.begin(walk) for o in OBSERVERS) if s is not None]
        self.folder = _new_dump_folder(walk, device, donate, pipeline) if settings.dump_dir else None
        self.count = 0
        if self.folder is not None:
            from lazycore.passes.pipeline import default_for  # (lowering: MLIR is loaded)

            _write(self.folder, "graph.dot", walk_to_dot(walk, name=os.path.basename(self.folder)))
            key = _key(walk, device, donate, pipeline)
            _write(self.folder, "info.txt", (
                f"device: {device.name}\npipeline: {pipeline or default_for(device.platform)}\ndonate (param -> output): {dict(donate)}\n"
                f"key: {key.hex()}\nnodes: {len(walk.order)}\nparameters: {len(walk.params)}\n"
                f"outputs: {', '.join(str(v.type) for v in walk.outputs)}\n"))
        self._stage("input", "00-input.mlir", module.operation)

    def _stage(self, name: str, filename: str | None, op) -> None:
        text = _printer(op)
        if self.folder is not None and filename is not None:
            _write(self.folder, filename, text(True))
        for sink in self.sinks:
            sink.stage(name, text)

    def after_pass(self, name: str, module_op) -> None:
        self.count += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "pass"
        self._stage(name, f"{self.count:02d}-{safe}.mlir", module_op)

    def finish(self, module) -> None:
        self._stage("stablehlo", "stablehlo.mlir", module.operation)
        for sink in self.sinks:
            sink.end()


def _key(walk, device, donate, pipeline) -> bytes:
    from lazycore.runtime.programs import make_key

    return make_key(walk.encoding, device, donate, pipeline)


_next_number: dict[str, int] = {}


def _new_dump_folder(walk, device, donate, pipeline) -> str:
    root = os.path.abspath(os.fspath(settings.dump_dir))
    os.makedirs(root, exist_ok=True)
    n = _next_number.get(root)
    if n is None:  # continue after folders of earlier runs
        taken = [int(m.group(1)) for m in (re.match(r"(\d+)-", e) for e in os.listdir(root)) if m]
        n = max(taken, default=0) + 1
    short = _key(walk, device, donate, pipeline).hex()[:12]
    while True:
        path = os.path.join(root, f"{n:04d}-{short}")
        n += 1
        try:
            os.mkdir(path)
            break
        except FileExistsError:
            continue
    _next_number[root] = n
    return path


def _write(folder: str, name: str, text: str) -> None:
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        f.write(text)


events.listen("lowering", recording)
