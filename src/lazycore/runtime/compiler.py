"""From a ``lazy``-dialect module to a PJRT executable.

``compile_module`` is the meeting point of the compiler half and the runtime
half: lazy module in, executable out. The hand-off to jaxlib is one call,
:func:`lazycore.mlir.serialize_stablehlo`, at the version jaxlib reports.
A barrier's new program comes from :func:`lazycore.runtime.programs.program`:
loaded from the persistent compile cache, or lowered and compiled here.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lazycore.dialect import create, from_mlir_type, tensor_type
from lazycore.dialect.types import TensorType
from lazycore.ir import events, heap
from lazycore.ir.config import settings
from lazycore.ir.graph import Value
from lazycore.ir.regions import RegionNode
from lazycore.ir.sourceloc import resolve
from lazycore.mlir import func, ir, new_context, serialize_stablehlo
from lazycore.passes import rolled_emit
from lazycore.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from lazycore.runtime import checks, pjrt, rolling
from lazycore.runtime.failures import ProgramError


def parse(text: str, context: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text in a lazycore context (``lazy`` and StableHLO loaded)."""
    ctx = context or new_context()
    with ctx:
        return ir.Module.parse(text)


def entry_types(module: ir.Module, entry: str = "main"):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == entry:
            ft = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return tuple(from_mlir_type(t) for t in ft.inputs), tuple(from_mlir_type(t) for t in ft.results)
    raise ValueError(f"module has no entry function @{entry}")


def lower(
    module: ir.Module | str,
    pipeline: str = DEFAULT_PIPELINE,
    *,
    donate: dict[int, int] | None = None,
    donors: Sequence[int] | None = None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
    verify_each: bool = True,
) -> ir.Module:
    """Run the pipeline (default: canonicalize, cse, aliasing, to StableHLO).

    ``donate``: argument -> result aliases; ``donors``: arguments whose
    results XLA picks (a program split over a mesh: :mod:`lazycore.passes.aliasing`);
    ``verify_each``: :func:`~lazycore.passes.pipeline.run_pipeline`'s."""
    if isinstance(module, str):
        module = parse(module)
    # build_module's function is @main; the plan says so rather than relying
    # on it being the module's only one
    overrides = None
    if donate:
        overrides = {"lazy-aliasing": {"donate": dict(donate), "entry": "main"}}
    elif donors:
        overrides = {"lazy-aliasing": {"donors": list(donors), "entry": "main"}}
    run_pipeline(module, pipeline, overrides=overrides, after_each=after_each, verify_each=verify_each)
    return module


def stablehlo_artifact(module: ir.Module) -> tuple[bytes, tuple, tuple]:
    """A StableHLO module as jaxlib reads it, with its entry's parameter and result types."""
    inputs, outputs = entry_types(module)
    # with locations: XLA's op metadata and errors then name the user's lines
    text = module.operation.get_asm(enable_debug_info=True)
    return serialize_stablehlo(text, pjrt.consumer_stablehlo_version()), inputs, outputs


def compile_stablehlo(module: ir.Module, device=None) -> pjrt.Executable:
    """Serialize a StableHLO module for jaxlib and compile it with PJRT."""
    artifact, inputs, outputs = stablehlo_artifact(module)
    return pjrt.compile_artifact(artifact, inputs, outputs, device)


def compile_module(
    module: ir.Module | str,
    pipeline: str = DEFAULT_PIPELINE,
    *,
    donate: dict[int, int] | None = None,
    device=None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
) -> pjrt.Executable:
    """Lazy-dialect module (or its text) -> executable on ``device`` (CPU default)."""
    return compile_stablehlo(lower(module, pipeline, donate=donate, after_each=after_each), device)


def run_module(module: ir.Module | str, inputs: Sequence[np.ndarray], **kw) -> list[np.ndarray]:
    """Compile and run once on host arrays (tests, demos)."""
    return compile_module(module, **kw).run_numpy([np.asarray(a) for a in inputs])


def build_module(walk, device=None, constants: dict | None = None):
    """The walk as a ``lazy``-dialect module with entry ``@main``: the walk's
    outputs, then the flags of its value checks (:mod:`lazycore.runtime.checks`).

    On a mesh (``device``), every argument carries its buffer's layout as
    ``mhlo.sharding`` (XLA's text, as jax writes it for a ``jit`` with
    ``in_shardings``; scalar packs are replicated) and the module the
    partition count; XLA's SPMD partitioner splits the program from them and
    the ``lazy.shard`` constraints inside. Data leaves with a layout carry it
    whatever ``device`` is, so a module built for inspection shows it too.
    ``constants``: id(leaf) -> host array, leaves built as ``lazy.constant``
    instead of parameters (an exported program's captured values)."""
    ctx = new_context()
    unknown = ir.Location.unknown(ctx)
    locs: dict = {}  # raw location -> ir.Location: the user's file:line per op

    def location(loc):
        if loc is None:
            return unknown
        mlir_loc = locs.get(loc)
        if mlir_loc is None:
            file, line = resolve(loc)
            mlir_loc = locs[loc] = ir.Location.file(file, line, 0, ctx)
        return mlir_loc

    returned = list(walk.outputs) + checks.flag_values(walk)
    with ctx, unknown:
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            ftype = ir.FunctionType.get(
                [tensor_type(p.types[0]) for p in walk.data]
                + [tensor_type(TensorType((len(group),), dtype)) for dtype, group in walk.packs.items()],
                [tensor_type(o.type) for o in returned],
            )
            fn = func.FuncOp("main", ftype)
            block = fn.add_entry_block()
            env: dict[int, list] = {}
            for arg, leaf in zip(block.arguments, walk.data):
                env[id(leaf)] = [arg]
            with ir.InsertionPoint(block):
                packs = block.arguments[len(walk.data):]
                for pack, group in zip(packs, walk.packs.values()):
                    for i, leaf in enumerate(group):
                        one = create("slice", pack, start=[i], limit=[i + 1], strides=[1]).result
                        env[id(leaf)] = [create("reshape", one, shape=()).result]
                chains = _chains(walk, device, constants)
                ends = {chain.last_position: chain for chain in chains}
                members = {id(n) for chain in chains for copy in chain.copies for n in copy}
                stacks = rolled_emit.Stacks()
                for position, node in enumerate(walk.order):
                    if id(node) in members:
                        if position in ends:
                            rolled_emit.emit_chain(ends[position], env, stacks,
                                                   lambda node, operands: _emit(node, operands, location))
                        continue
                    if node.is_leaf:
                        if constants and id(node) in constants:
                            env[id(node)] = [create("constant", value=constants[id(node)]).result]
                        continue
                    operands = [
                        env[id(o.node)][o.index] if type(o) is Value else [env[id(v.node)][v.index] for v in o]
                        for o in node.operands
                    ]
                    env[id(node)] = _emit(node, operands, location)
                func.ReturnOp([env[id(o.node)][o.index] for o in returned])
            _annotate_layouts(module, fn, walk, device)
    return module


def _chains(walk, device, constants) -> list:
    """The runs of identical layers to emit as loops (:mod:`lazycore.runtime.rolling`)."""
    if not settings.roll_loops or constants or (device is not None and isinstance(device.pjrt, pjrt.MeshTarget)):
        return []
    return rolling.find_chains(walk.order, list(walk.outputs))


def _emit(node, operands: list, location) -> list:
    """The node as an op at the current insertion point; its results."""
    with location(node.loc):
        if type(node) is RegionNode:
            return _emit_region(node, operands, location)
        return list(create(node.op, *operands, **node.attrs).results)


def _emit_region(node: RegionNode, operands: list, location) -> list:
    """A loop or branch node as ``stablehlo.while`` / ``stablehlo.case``
    whose regions hold its bodies' ``lazy`` ops (``lazy-to-stablehlo`` lowers
    them in place). IRDL cannot declare a ``lazy`` op with a variadic group
    of values of different types (one constraint variable binds one type for
    the whole group), and a loop carries values of many types: StableHLO's own
    region ops, which the bindings register, hold the bodies instead, and
    their verifiers check the regions' signatures."""
    if node.op == "call":  # a captured step: its ops in place
        return _emit_body(node.bodies[0], list(operands[0]), location)
    types = [tensor_type(t) for t in node.types]
    if node.op == "while":
        carried = operands[0]
        op = ir.Operation.create("stablehlo.while", results=types, operands=carried, regions=2)
        for region, body in zip(op.regions, node.bodies):
            block = region.blocks.append(*[v.type for v in carried])
            with ir.InsertionPoint(block):
                ir.Operation.create("stablehlo.return", operands=_emit_body(body, list(block.arguments), location))
        return list(op.results)
    index, given = operands
    if from_mlir_type(index.type).dtype != "i32":
        index = create("convert", index, dtype="i32").result
    op = ir.Operation.create("stablehlo.case", results=types, operands=[index], regions=len(node.bodies))
    for region, body in zip(op.regions, node.bodies):
        # branches read the operands from above: stablehlo.case's regions take no arguments
        block = region.blocks.append()
        with ir.InsertionPoint(block):
            ir.Operation.create("stablehlo.return", operands=_emit_body(body, list(given), location))
    return list(op.results)


def _emit_body(body, bound: list, location) -> list:
    """A body's ops at the current insertion point; what it yields. ``bound``:
    the values standing for the region node's operands."""
    env: dict[int, list] = {}
    at = body.boundary

    def get(v):
        p = at.get((id(v[0]), v[1]))
        return bound[p] if p is not None else env[id(v[0])][v[1]]

    for node in body.order:
        operands = [get(o) if type(o) is Value else [get(v) for v in o] for o in node.operands]
        env[id(node)] = _emit(node, operands, location)
    return [get(v) for v in body.results]


def _annotate_layouts(module, fn, walk, device) -> None:
    mesh = device is not None and isinstance(device.pjrt, pjrt.MeshTarget)
    layouts = [leaf.sharding for leaf in walk.data]
    if not mesh and all(s is None for s in layouts):
        return
    replicated = "{replicated}"
    texts = [replicated if s is None else str(s) for s in layouts] + [replicated] * len(walk.packs)
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({"mhlo.sharding": ir.StringAttr.get(text)}) for text in texts]
    )
    if mesh:
        i32 = ir.IntegerType.get_signless(32)
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, len(device.pjrt.devices))
        module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)


def lower_walk(walk, device, donate: dict[int, int], pipeline: str | None) -> ir.Module:
    """The walk as a StableHLO module through ``pipeline`` (None: the default
    one); raises :class:`~lazycore.runtime.failures.ProgramError`."""
    passes = pipeline or DEFAULT_PIPELINE
    with events.timed("lowering"), heap.collector_paused():
        try:
            module = build_module(walk, device)
            # observers of every stage (IR dumps, lazycore.testing captures)
            watchers = events.emit("lowering", walk, module, device, donate, pipeline)

            def after_each(name, op):
                for w in watchers:
                    w.after_pass(name, op)

            observe = dict(after_each=after_each if watchers else None, verify_each=settings.verify_each)
            if isinstance(device.pjrt, pjrt.MeshTarget):
                # the results' layouts are XLA's to choose: it picks what each donor aliases
                lower(module, passes, donors=sorted(donate), **observe)
            else:
                lower(module, passes, donate=donate, **observe)
            for w in watchers:
                w.finish(module)
        except Exception as e:
            raise ProgramError("lower", e) from e
    return module


def _compile(compile_fn, *args) -> pjrt.Executable:
    with events.timed("compile"):
        try:
            exe = compile_fn(*args)
        except Exception as e:
            raise ProgramError("compile", e) from e
    events.bump("compiles")
    return exe


def compile_walk(walk, device, donate: dict[int, int], pipeline: str | None):
    """The walk's program; raises :class:`~lazycore.runtime.failures.ProgramError`."""
    module = lower_walk(walk, device, donate, pipeline)
    return _compile(compile_stablehlo, module, device.pjrt)


def walk_artifact(walk, device, donate: dict[int, int], pipeline: str | None) -> tuple[bytes, tuple, tuple]:
    """The walk lowered to a portable StableHLO artifact, with its input and
    output types; raises :class:`~lazycore.runtime.failures.ProgramError`."""
    module = lower_walk(walk, device, donate, pipeline)
    try:  # as compile_walk does it, in its compile stage
        return stablehlo_artifact(module)
    except Exception as e:
        raise ProgramError("compile", e) from e


def compile_artifact(artifact: bytes, inputs, outputs, device) -> pjrt.Executable:
    """:func:`walk_artifact`'s artifact compiled for ``device``."""
    return _compile(pjrt.compile_artifact, artifact, inputs, outputs, device.pjrt)
