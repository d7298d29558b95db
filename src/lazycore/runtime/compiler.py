"""From a ``lazy``-dialect module to a PJRT executable.

``compile_module`` is the meeting point of the compiler half and the runtime
half: lazy module in, executable out. The hand-off to jaxlib is one call,
:func:`lazycore.mlir.serialize_stablehlo`, at the version jaxlib reports.
A barrier's new program comes from :func:`program`: loaded from the
persistent compile cache (:mod:`lazycore.runtime.diskcache`, keys from
:func:`portable_key`) or compiled and written there.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

import lazycore
from lazycore.dialect import create, from_mlir_type, tensor_type
from lazycore.dialect.types import TensorType
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.graph import Value
from lazycore.ir.regions import RegionNode
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import resolve
from lazycore.mlir import func, ir, new_context, serialize_stablehlo
from lazycore.passes.lowering import registry
from lazycore.passes import rolled_emit
from lazycore.passes.pipeline import DEFAULT_PIPELINE, PASSES, run_pipeline, split_elements
from lazycore.runtime import checks, pjrt, rolling
from lazycore.runtime.diskcache import DISK
from lazycore.runtime.failures import ProgramError


_ENVIRONMENTS = Memo("runtime.environments", 64)


def _environments() -> tuple[bytes, bytes | None]:
    """:func:`environment` and :func:`portable_environment`, kept per state of
    the user's lowerings and PDL patterns (every barrier asks)."""
    state = (tuple(registry.USER.items()), tuple(registry.PDL_SOURCES))
    envs = _ENVIRONMENTS.get(state)
    if envs is None:
        user = [(name, [(getattr(r.fn, "__module__", None), getattr(r.fn, "__qualname__", None), id(r.fn)) for r in rs])
                for name, rs in sorted(registry.USER.items())]
        pdl = [hashlib.blake2b(t.encode(), digest_size=16).hexdigest() for t in registry.PDL_SOURCES]
        versions = (lazycore.__version__, pjrt.jaxlib_version(), pjrt.consumer_stablehlo_version())
        env = repr(versions + (user, pdl)).encode()
        portable = None
        if not registry.USER:
            portable = repr((_bindings_version(), _compiler_sources().hex(), pdl)).encode() + env
        envs = _ENVIRONMENTS.put(state, (env, portable))
    return envs


def environment() -> bytes:
    """What outside the graph changes the compiled program, as bytes."""
    return _environments()[0]


def portable_environment() -> bytes | None:
    """:func:`environment` as every process sees it, for the persistent cache:
    also the MLIR bindings' version and a digest of the compiler's own source
    (an edited pass or lowering must not find programs compiled before the
    edit, whatever the version says). None while user Python lowerings are
    registered: no digest of a function covers what it reads (closures,
    globals, other modules), so :func:`program` keys those programs by their
    StableHLO instead."""
    return _environments()[1]


def _bindings_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch-mlir")
    except PackageNotFoundError:
        return "unknown"


@functools.cache
def _compiler_sources() -> bytes:
    """A digest of the source of everything between a walk and its StableHLO:
    the op table, the passes and lowerings, this module, the bindings' door,
    and the graph and walk that key a program."""
    import lazycore.dialect
    import lazycore.mlir
    import lazycore.passes
    import lazycore.passes.lowering
    from lazycore.ir import graph
    from lazycore.runtime import barrier

    files: set[Path] = {Path(__file__), Path(lazycore.mlir.__file__), Path(graph.__file__), Path(barrier.__file__)}
    for package in (lazycore.dialect, lazycore.passes, lazycore.passes.lowering):
        files.update(Path(package.__file__).parent.rglob("*.py"))
    # names and contents only: two checkouts of one source share programs
    parts = sorted(path.name.encode() + b"\0" + hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
                   for path in files)
    return hashlib.blake2b(b"".join(parts), digest_size=16).digest()


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
    h.update(repr((device.name, device.kind, sorted(donate.items()), pipeline, settings.roll_loops)).encode())
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
    donors: Sequence[int] | None = None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
) -> ir.Module:
    """Run the pipeline (default: canonicalize, cse, aliasing, to StableHLO).

    ``donate``: argument -> result aliases; ``donors``: arguments whose
    results XLA picks (a program split over a mesh: :mod:`lazycore.passes.aliasing`)."""
    if isinstance(module, str):
        module = parse(module)
    # build_module's function is @main; the plan says so rather than relying
    # on it being the module's only one
    overrides = None
    if donate:
        overrides = {"lazy-aliasing": {"donate": dict(donate), "entry": "main"}}
    elif donors:
        overrides = {"lazy-aliasing": {"donors": list(donors), "entry": "main"}}
    run_pipeline(module, pipeline, overrides=overrides, after_each=after_each)
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


def lower_walk(walk, device, donate: dict[int, int], pipeline: str) -> ir.Module:
    """The walk as a StableHLO module; raises :class:`~lazycore.runtime.failures.ProgramError`."""
    with events.timed("lowering"):
        try:
            module = build_module(walk, device)
            # observers of every stage (IR dumps, lazycore.testing captures)
            watchers = events.emit("lowering", walk, module, device, donate, pipeline)

            def after_each(name, op):
                for w in watchers:
                    w.after_pass(name, op)

            if isinstance(device.pjrt, pjrt.MeshTarget):
                # the results' layouts are XLA's to choose: it picks what each donor aliases
                lower(module, pipeline, donors=sorted(donate), after_each=after_each if watchers else None)
            else:
                lower(module, pipeline, donate=donate, after_each=after_each if watchers else None)
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


def compile_walk(walk, device, donate: dict[int, int], pipeline: str):
    """The walk's program; raises :class:`~lazycore.runtime.failures.ProgramError`."""
    module = lower_walk(walk, device, donate, pipeline)
    return _compile(compile_stablehlo, module, device.pjrt)


def portable_key(walk: bytes, device, donate: dict[int, int], pipeline: str) -> bytes | None:
    """The persistent cache's key for a walked graph: :func:`make_key`'s
    parts as every process sees them (:func:`portable_environment`), and the
    XLA side (:func:`lazycore.runtime.pjrt.fingerprint`: versions, flags,
    compile options, platform, device kind and count). None while user Python
    lowerings are registered or ``pipeline`` names a pass registered outside
    lazycore: their code is not in the key."""
    env = portable_environment()
    if env is None or not _own_passes_only(pipeline):
        return None
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(("walk", device.name, device.kind, sorted(donate.items()), pipeline, settings.roll_loops)).encode())
    for part in (env, pjrt.fingerprint(device.pjrt), walk):
        h.update(b"\0")
        h.update(part)
    return h.digest()


def _own_passes_only(pipeline: str) -> bool:
    """No element of ``pipeline`` is a Python pass registered outside lazycore
    (MLIR's own passes come with the bindings, whose version is in the key)."""
    for element in split_elements(pipeline):
        info = PASSES.get(element.partition("{")[0].strip())
        if info is not None and not info.factory.__module__.startswith("lazycore."):
            return False
    return True


def artifact_key(artifact: bytes, device) -> bytes:
    """The persistent cache's key for a program known by its StableHLO."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(("artifact", device.name, device.kind)).encode())
    for part in (pjrt.fingerprint(device.pjrt), artifact):
        h.update(b"\0")
        h.update(part)
    return h.digest()


def program(walk, device, donate: dict[int, int], pipeline: str) -> tuple[pjrt.Executable, bool]:
    """The walk's program, and whether it came from the persistent cache
    (:mod:`lazycore.runtime.diskcache`) instead of being compiled (and
    written there); raises :class:`~lazycore.runtime.failures.ProgramError`.

    The cache is looked up by :func:`portable_key` before lowering; while user
    Python lowerings or passes take part, by the lowered StableHLO
    (:func:`artifact_key`), which saves the XLA compile only. With
    ``settings.dump_dir`` set the program is always lowered and compiled: the
    dumps show every stage of every new program."""
    if settings.cache_dir is None:
        return compile_walk(walk, device, donate, pipeline), False
    read = not settings.dump_dir
    key = portable_key(walk.encoding, device, donate, pipeline)
    if key is not None:
        exe = DISK.load(key, device.pjrt) if read else None
        if exe is not None:
            return exe, True
        exe = compile_walk(walk, device, donate, pipeline)
    else:
        module = lower_walk(walk, device, donate, pipeline)
        try:  # as compile_walk does it, in its compile stage
            artifact, inputs, outputs = stablehlo_artifact(module)
        except Exception as e:
            raise ProgramError("compile", e) from e
        key = artifact_key(artifact, device)
        exe = DISK.load(key, device.pjrt) if read else None
        if exe is not None:
            return exe, True
        exe = _compile(pjrt.compile_artifact, artifact, inputs, outputs, device.pjrt)
    DISK.store(key, exe)
    return exe, False
