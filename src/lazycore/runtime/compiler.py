"""From a ``lazy``-dialect module to a PJRT executable.

``compile_module`` is the meeting point of the compiler half and the runtime
half: lazy module in, executable out. The hand-off to jaxlib is one call,
:func:`lazycore.mlir.serialize_stablehlo`, at the version jaxlib reports.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Sequence

import numpy as np

import lazycore
from lazycore.dialect import create, from_mlir_type, tensor_type
from lazycore.dialect.types import TensorType
from lazycore.ir import events
from lazycore.ir.graph import Value
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import resolve
from lazycore.mlir import func, ir, new_context, serialize_stablehlo
from lazycore.passes.lowering import registry
from lazycore.passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from lazycore.runtime import checks, pjrt
from lazycore.runtime.failures import ProgramError


_ENVIRONMENTS = Memo("runtime.environments", 64)


def environment() -> bytes:
    """What outside the graph changes the compiled program, as bytes; kept
    per state of the user's lowerings and PDL patterns (every barrier asks)."""
    state = (tuple(registry.USER.items()), tuple(registry.PDL_SOURCES))
    env = _ENVIRONMENTS.get(state)
    if env is None:
        user = sorted((name, fn.__module__, fn.__qualname__, id(fn)) for name, fn in registry.USER.items())
        pdl = [hashlib.blake2b(t.encode(), digest_size=16).hexdigest() for t in registry.PDL_SOURCES]
        env = repr((lazycore.__version__, pjrt.jaxlib_version(), pjrt.consumer_stablehlo_version(), user, pdl))
        env = _ENVIRONMENTS.put(state, env.encode())
    return env


def make_key(walk: bytes, device, donate: dict[int, int], pipeline: str) -> bytes:
    """The compile cache's key for a walked graph.

    A key is a 128-bit BLAKE2b digest over everything that decides
    what the compiled program computes and how it is called:

    * the graph *as walked*: for every node in the barrier's post-order walk its
      structural digest (op, attributes, result types, operand digests; see
      :mod:`lazycore.ir.graph`) and, for every operand edge, the walk position of the
      node it comes from. Node digests alone cannot tell ``add(a, a)`` from
      ``add(a, b)``: leaves hash their type only. The edge positions record how
      leaves (and inner nodes) are shared, a stronger form of the
      parameter-index pattern, so two graphs with one key are the same DAG and
      bind the same parameters in the same places;
    * the outputs (walk positions and result indices) and the parameter types;
    * the device (name and chip model), the donation plan, the pass pipeline,
      any user lowerings or PDL patterns registered, and the lazycore, jaxlib and
      StableHLO versions.

    A cryptographic digest of an unambiguous encoding makes a wrong hit as
    likely as a 128-bit collision, so no structural comparison is needed on a
    hit.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((device.name, device.kind, sorted(donate.items()), pipeline)).encode())
    h.update(b"\0")
    h.update(environment())
    h.update(b"\0")
    h.update(walk)
    return h.digest()


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
    after_each: Callable[[str, ir.Operation], None] | None = None,
) -> ir.Module:
    """Run the pipeline (default: canonicalize, cse, aliasing, to StableHLO)."""
    if isinstance(module, str):
        module = parse(module)
    overrides = {"lazy-aliasing": {"donate": dict(donate)}} if donate else None
    run_pipeline(module, pipeline, overrides=overrides, after_each=after_each)
    return module


def compile_stablehlo(module: ir.Module, device=None) -> pjrt.Executable:
    """Serialize a StableHLO module for jaxlib and compile it with PJRT."""
    inputs, outputs = entry_types(module)
    # with locations: XLA's op metadata and errors then name the user's lines
    text = module.operation.get_asm(enable_debug_info=True)
    artifact = serialize_stablehlo(text, pjrt.consumer_stablehlo_version())
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


def build_module(walk):
    """The walk as a ``lazy``-dialect module with entry ``@main``: the walk's
    outputs, then the flags of its value checks (:mod:`lazycore.runtime.checks`)."""
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
                for node in walk.order:
                    if node.is_leaf:
                        continue
                    operands = [
                        env[id(o.node)][o.index] if type(o) is Value else [env[id(v.node)][v.index] for v in o]
                        for o in node.operands
                    ]
                    with location(node.loc):
                        env[id(node)] = list(create(node.op, *operands, **node.attrs).results)
                func.ReturnOp([env[id(o.node)][o.index] for o in returned])
    return module


def compile_walk(walk, device, donate: dict[int, int], pipeline: str):
    """The walk's program; raises :class:`~lazycore.runtime.failures.ProgramError`."""
    with events.timed("lowering"):
        try:
            module = build_module(walk)
            # observers of every stage (IR dumps, lazycore.testing captures)
            watchers = events.emit("lowering", walk, module, device, donate, pipeline)

            def after_each(name, op):
                for w in watchers:
                    w.after_pass(name, op)

            lower(module, pipeline, donate=donate, after_each=after_each if watchers else None)
            for w in watchers:
                w.finish(module)
        except Exception as e:
            raise ProgramError("lower", e) from e
    with events.timed("compile"):
        try:
            exe = compile_stablehlo(module, device.pjrt)
        except Exception as e:
            raise ProgramError("compile", e) from e
    events.bump("compiles")
    return exe
