"""From a ``lazy``-dialect module to a PJRT executable.

``compile_module`` is the meeting point of the compiler half and the runtime
half: lazy module in, executable out. The hand-off to jaxlib is one call,
:func:`lazycore.dialect.mlir.serialize_stablehlo_module`, at the version jaxlib reports.
A barrier's new program comes from :func:`lazycore.runtime.programs.program`:
loaded from the persistent compile cache, or lowered and compiled here.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from lazycore.dialect import create, from_mlir_type, tensor_type
from lazycore.dialect.types import TensorType
from lazycore.ir import events, heap, memo
from lazycore.ir.config import settings
from lazycore.ir.graph import Value, map_operands
from lazycore.ir.regions import RegionNode
from lazycore.ir.sourceloc import resolve
from lazycore.dialect.mlir import func, ir, serialize_stablehlo_module
from lazycore.dialect.build import CONTEXTS, new_context
from lazycore.passes import rolled_emit
from lazycore.passes.lowering import shardy
from lazycore.passes.pipeline import DEFAULT_PIPELINE, default_for, run_pipeline, with_option
from lazycore.runtime import checks, pjrt, rolling
from lazycore.runtime.failures import ProgramError
from lazycore.ir.context import locked


# MLIR work in one thread at a time: the `lazy` dialect's loading and its Python
# verifiers and folds are process-wide state of the bindings (docs/threads.md)
_locked = locked

# (a context lent is a few MB at most: what its bound lets it intern)
memo.register("mlir.contexts", CONTEXTS, CONTEXTS.size)


@_locked
def parse(text: str, context: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text in a lazycore context (``lazy`` and StableHLO loaded)."""
    with context or new_context():
        return ir.Module.parse(text)


def entry_types(module: ir.Module, entry: str = "main"):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == entry:
            ft = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return tuple(from_mlir_type(t) for t in ft.inputs), tuple(from_mlir_type(t) for t in ft.results)
    raise ValueError(f"module has no entry function @{entry}")


@_locked
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
    if donate or donors:
        overrides = {"lazy-aliasing": {"donate": dict(donate or {}), "donors": list(donors or ()), "entry": "main"}}
    run_pipeline(module, pipeline, overrides=overrides, after_each=after_each, verify_each=verify_each)
    return module


@_locked
def stablehlo_artifact(module: ir.Module) -> tuple[bytes, tuple, tuple]:
    """A StableHLO module as jaxlib reads it, with its entry's parameter and result types."""
    inputs, outputs = entry_types(module)
    # a copy: the module itself stays as the pipeline left it (dumps, captures)
    copy = ir.Module.create(loc=module.operation.location)
    attributes = module.operation.attributes
    for name in attributes:  # (a mesh's partition counts)
        copy.operation.attributes[name] = attributes[name]
    for op in module.body.operations:
        op.operation.clone(ip=ir.InsertionPoint(copy.body))
    _scalar_broadcasts_per_use(copy.operation)
    # with locations: XLA's op metadata and errors then name the user's lines
    return serialize_stablehlo_module(copy, pjrt.consumer_stablehlo_version()), inputs, outputs


def _scalar_broadcasts_per_use(op) -> None:
    """One ``stablehlo.broadcast_in_dim`` of a scalar per use, as jax lowers a
    number in an expression. The graph shares one node per distinct value
    (digests), so a chain like ``x = x * 0.999 + 0.01`` repeated 100 times
    reads two broadcasts from 200 ops, and XLA's algebraic simplifier then
    cycles ("likely stuck in a circular simplification loop", logged on
    stderr); a broadcast per use is what it expects (and fuses the same)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.regions:
                    _scalar_broadcasts_per_use(inner)
                if inner.name != "stablehlo.broadcast_in_dim" or ir.RankedTensorType(inner.operands[0].type).rank:
                    continue
                for use in list(inner.result.uses)[1:]:
                    user = use.owner
                    user = getattr(user, "operation", user)
                    copy = inner.clone(ip=ir.InsertionPoint(user))
                    user.operands[use.operand_number] = copy.result


@_locked
def compile_stablehlo(module: ir.Module, device=None) -> pjrt.Executable:
    """Serialize a StableHLO module for jaxlib and compile it with PJRT."""
    artifact, inputs, outputs = stablehlo_artifact(module)
    return pjrt.compile_artifact(artifact, inputs, outputs, device, fusion_emitters=_fusion_emitters(module, artifact))


_FLOAT8 = re.compile(r"[<x]f8E")


def _fusion_emitters(module: ir.Module, artifact: bytes) -> bool:
    """Whether XLA emits the program's kernels with its MLIR fusion emitters:
    a large program, or one computing with float8 (:data:`lazycore.runtime.pjrt.SMALL_PROGRAM_BYTES`).
    A small program's text is short: printing it is a millisecond of a compile's 30-300."""
    return len(artifact) >= pjrt.SMALL_PROGRAM_BYTES or bool(_FLOAT8.search(module.operation.get_asm()))


def for_platform(pipeline: str, platform: str | None) -> str:
    """``pipeline`` as compiled for ``platform`` (None: CPU): on CPU a float
    divide by a broadcast is correctly rounded, as eager CPU torch and NumPy
    divide (XLA multiplies by the reciprocal: lazy-to-stablehlo's division
    option). Eager CUDA multiplies by the reciprocal itself; TPUs have no float64."""
    if platform not in (None, "cpu"):
        return pipeline
    return with_option(pipeline, "lazy-to-stablehlo", "division", "exact")


@_locked
def compile_module(
    module: ir.Module | str,
    pipeline: str = DEFAULT_PIPELINE,
    *,
    donate: dict[int, int] | None = None,
    device=None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
) -> pjrt.Executable:
    """Lazy-dialect module (or its text) -> executable on ``device`` (CPU default)."""
    pipeline = for_platform(pipeline, getattr(device, "platform", None))
    if isinstance(module, str):  # parsed, lowered and compiled here: a lent context (CONTEXTS)
        with CONTEXTS.lend() as ctx:
            return compile_module(parse(module, ctx), pipeline, donate=donate, device=device, after_each=after_each)
    return compile_stablehlo(lower(module, pipeline, donate=donate, after_each=after_each), device)


@_locked
def run_module(module: ir.Module | str, inputs: Sequence[np.ndarray], **kw) -> list[np.ndarray]:
    """Compile and run once on host arrays (tests, demos)."""
    return compile_module(module, **kw).run_numpy([np.asarray(a) for a in inputs])


def build_module(walk, device=None, constants: dict | None = None):
    """The walk as a ``lazy``-dialect module with entry ``@main``: the walk's
    outputs, then the flags of its value checks (:mod:`lazycore.runtime.checks`).

    On a mesh (``device``), every argument carries its buffer's layout as
    Shardy's ``xla.sdy.sharding`` (in ``mhlo.frontend_attributes``: the
    round-trip form of what jax writes for a ``jit`` with ``in_shardings``,
    see :mod:`lazycore.passes.lowering.collectives`; scalar packs are
    replicated), and the module declares the mesh and the partition count;
    XLA's Shardy partitioner splits the program from them and the
    ``lazy.shard`` constraints inside. Data leaves with a layout carry it
    whatever ``device`` is, so a module built for inspection shows it too.
    ``constants``: id(leaf) -> host array, leaves built as ``lazy.constant``
    instead of parameters (an exported program's captured values)."""
    return build_program(walk, device, constants)[0]


class Returned:
    """How a barrier's program (:func:`build_program`) is called and what it returns."""

    def __init__(self):
        self.arguments: tuple | None = None
        """Per device-data entry argument, the index of its parameter in
        ``walk.data``, or the indices of the parameters stacked into it (a
        rolled loop reads them); None: argument k is parameter k."""
        self.rows: tuple | None = None
        """Per output of the walk, ``(result, row)``: row -1 is the whole
        result, else the output is that row of a returned stack
        (:mod:`lazycore.runtime.stacks`); None: result k is output k."""
        self.at: list[int] = []
        """Per parameter, its argument when it has one of its own, else -1."""
        self.stack_results: dict[int, int] = {}
        """Stack argument -> the result holding that stack after the loops
        that wrote their rows over it in place (where it is donated)."""
        self.results: list[int] = []
        """Per output of the walk, its result when it has one of its own, else -1."""


@_locked
def build_program(walk, device=None, constants: dict | None = None, stacked: bool = False,
                  donate: dict[int, int] | None = None, flag_vector: bool = False,
                  context: ir.Context | None = None):
    """:func:`build_module`'s module and its :class:`Returned`. ``stacked``:
    the device-data parameters a rolled loop reads as a stack come in
    stacked, one argument per stack, and outputs are returned as rows of
    stacks (:func:`_returned`; ``donate``: the barrier's donation plan, whose
    pairs are each parameter's successor). ``flag_vector``: the value checks'
    flags are one vector result, not a scalar result each (:func:`_flag_results`).
    ``context``: the one to build in, else a new one (the module is the caller's)."""
    ctx = context or new_context()
    unknown = ir.Location.unknown(ctx)
    locs: dict = {}  # raw location -> ir.Location: the user's file:line per op
    info = Returned()

    def location(loc):
        if loc is None:
            return unknown
        mlir_loc = locs.get(loc)
        if mlir_loc is None:
            file, line = resolve(loc)
            mlir_loc = locs[loc] = ir.Location.file(file, line, 0, ctx)
        return mlir_loc

    # (a walk with captured steps may be emitted with their bodies in place: rolling.inlined)
    walk, chains = rolling.chains(walk, device, constants)
    groups = rolling.groups(walk, chains) if stacked else []  # (as stack_groups)
    grouped = {i for g in groups for i in g}
    plan: list = [i for i in range(len(walk.data)) if i not in grouped] + groups
    info.at = [-1] * len(walk.data)
    arg_types = []
    for a, entry in enumerate(plan):
        if type(entry) is int:
            info.at[entry] = a
            arg_types.append(walk.data[entry].types[0])
        else:
            t = walk.data[entry[0]].types[0]
            arg_types.append(TensorType((len(entry),) + tuple(t.shape), t.dtype))
    if groups:
        info.arguments = tuple(plan)
    flags = checks.flag_values(walk)
    with ctx, unknown:
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            inputs = ([tensor_type(t) for t in arg_types]
                      + [tensor_type(TensorType((len(group),), dtype)) for dtype, group in walk.packs.items()])
            fn = func.FuncOp("main", ir.FunctionType.get(inputs, []))
            block = fn.add_entry_block()
            env: dict[int, list] = {}

            def emitted(v):  # an operand's MLIR value
                return env[id(v[0])][v[1]]

            stacks = rolled_emit.Stacks()
            with ir.InsertionPoint(block):
                for a, entry in enumerate(plan):
                    arg = block.arguments[a]
                    if type(entry) is int:
                        env[id(walk.data[entry])] = [arg]
                        continue
                    # a member read outside the loops too is its row (unused rows are erased)
                    shape = list(arg_types[a].shape[1:])
                    for row, i in enumerate(entry):
                        if id(walk.data[i]) not in env:
                            one = create("slice", arg, start=[row] + [0] * len(shape), limit=[row + 1] + shape,
                                         strides=[1] * (len(shape) + 1)).result
                            env[id(walk.data[i])] = [create("reshape", one, shape=tuple(shape)).result]
                    stacks.add(arg, [Value(walk.data[i], 0) for i in entry])
                packs = block.arguments[len(arg_types):]
                for pack, group in zip(packs, walk.packs.values()):
                    for i, leaf in enumerate(group):
                        env[id(leaf)] = [rolled_emit.pack_element(pack, i)]
                ends = {chain.last_position: chain for chain in chains}
                members = {id(n) for chain in chains for copy in chain.copies for n in copy}
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
                    env[id(node)] = _emit(node, map_operands(node.operands, emitted, list), location)
                stack_args = [(a, entry) for a, entry in enumerate(plan) if type(entry) is not int]
                returned = _returned(walk, env, stacks, stacked, info, stack_args, donate or {})
                returned += _flag_results(flags, env, stacks, flag_vector)
                func.ReturnOp(returned)
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, [v.type for v in returned]))
            for a in range(len(plan) - len(groups), len(plan)):
                if a in info.stack_results:
                    continue
                latest = stacks.latest(block.arguments[a])
                j = next((j for j, v in enumerate(returned) if v == latest), None)
                if j is not None:
                    info.stack_results[a] = j
            _annotate_layouts(module, fn, walk, device, info)
    return module, info


def _returned(walk, env: dict, stacks, stacked: bool, info: Returned, groups: list, donate: dict) -> list:
    """The entry's results for the walk's outputs (``info`` records where each one is).

    With ``stacked``, outputs are returned as rows of stacks two ways. First,
    the new values of a stack argument's members (their handles' successors:
    ``donate``, parameter -> output) as one stack in the same order, which
    the next step's program takes back whole (``groups``: ``(argument,
    parameter indices)``); the stack its loop wrote them into when it holds
    exactly them, else stacked here. Then the rows of any stack a loop
    returned, when at least two, and at least half of them, are outputs
    (fewer would keep more memory alive than they save)."""
    outputs = walk.outputs
    arrays: list = []  # the stacks returned, in the order found
    placed: dict[int, tuple[int, int]] = {}  # output -> (stack number, row)
    for a, members in groups if stacked else ():
        js = [donate.get(i) for i in members]
        if (any(j is None or j in placed for j in js) or len(set(js)) != len(js)
                or any(outputs[j].type != walk.data[i].types[0] for i, j in zip(members, js))):
            continue
        values = [outputs[j] for j in js]
        found = stacks.find(values)
        if found is not None and found[1:] == (0, 1) and from_mlir_type(found[0].type).shape[0] == len(js):
            array = found[0]
        else:
            array = rolled_emit.stack_rows([env[id(v.node)][v.index] for v in values], values[0].type)
        info.stack_results[a] = len(arrays)  # a stack number for now: a result index below
        for r, j in enumerate(js):
            placed[j] = (len(arrays), r)
        arrays.append(array)
    found = [stacks.rows.get((id(o.node), o.index)) if stacked and k not in placed else None
             for k, o in enumerate(outputs)]
    counts: dict[int, int] = {}
    for f in found:
        if f is not None:
            counts[f[0]] = counts.get(f[0], 0) + 1
    whole = {n for n, c in counts.items() if c >= 2 and 2 * c >= stacks.sizes[n]}
    numbers: dict[int, int] = {}  # a stack of `stacks` -> its number in `arrays`
    for k, f in enumerate(found):
        if f is not None and f[0] in whole:
            n, row = f
            if n not in numbers:
                numbers[n] = len(arrays)
                arrays.append(stacks.arrays[n])
            placed[k] = (numbers[n], row)
    returned = []
    rows = []
    at: dict[int, int] = {}  # stack number -> result
    for k, o in enumerate(outputs):
        p = placed.get(k)
        if p is not None:
            n, row = p
            if n not in at:
                at[n] = len(returned)
                returned.append(arrays[n])
            rows.append((at[n], row))
            info.results.append(-1)
        else:
            info.results.append(len(returned))
            rows.append((len(returned), -1))
            returned.append(env[id(o.node)][o.index])
    info.stack_results = {a: at[n] for a, n in info.stack_results.items()}
    if placed:
        info.rows = tuple(rows)
    return returned


def _flag_results(flags: list, env: dict, stacks, vector: bool) -> list:
    """The entry's results for the value checks' ``flags``, in their order:
    a scalar per check (a check in a rolled loop's body: its copy's element
    of the array of flags the loop returns), or with ``vector`` as few
    results as the order allows: a rolled loop's array whole where its
    copies' checks come one after the other (they do, copy by copy), the
    others' flags between as one i1 vector where there are several (one read
    per run, and one kernel for all, where a scalar result is a kernel and a
    read of its own).
    Flattened, the results are one flag per check either way
    (:func:`lazycore.runtime.checks.failed`)."""
    out: list = []
    run: list = []  # flags not returned yet

    def flush():
        if vector and len(run) > 1:
            # (a nonzero flag converts to true: an index check's flag is a mask's maximum)
            cells = [v if from_mlir_type(v.type).dtype == "i1" else create("convert", v, dtype="i1").result
                     for v in run]
            out.append(rolled_emit.stack_rows(cells, TensorType((), "i1")))
        else:
            out.extend(run)
        run.clear()

    k = 0
    while k < len(flags):
        o = flags[k]
        at = stacks.flags.get((id(o.node), o.index))
        if at is None:
            run.append(env[id(o.node)][o.index])
            k += 1
            continue
        array, row, column = at
        rows, columns = from_mlir_type(array.type).shape
        whole = [(array, c, q) for c in range(rows) for q in range(columns)]
        if vector and (row, column) == (0, 0) and [stacks.flags.get((id(f.node), f.index))
                                                   for f in flags[k:k + len(whole)]] == whole:
            flush()
            out.append(array)
            k += len(whole)
            continue
        one = create("slice", array, start=[row, column], limit=[row + 1, column + 1], strides=[1, 1]).result
        run.append(create("reshape", one, shape=()).result)
        k += 1
    flush()
    return out


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
        env[id(node)] = _emit(node, map_operands(node.operands, get, list), location)
    return [get(v) for v in body.results]


def _annotate_layouts(module, fn, walk, device, info: Returned) -> None:
    target = device.pjrt if device is not None and isinstance(device.pjrt, pjrt.MeshTarget) else None
    # (a stack argument's members live on one device: rolled loops are not built for a mesh)
    layouts = [walk.data[i].sharding if type(i) is int else None for i in info.arguments or range(len(walk.data))]
    if target is None and all(s is None for s in layouts):
        return
    if target is None:  # a module built for inspection: the layouts' own mesh
        target = next(s.target for s in layouts if s is not None)
    inputs = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs
    # (the lowerings of lazy.shard and the collectives declare their meshes beside it)
    module.operation.attributes["mhlo.frontend_attributes"] = _frontend(
        {shardy.MESHES: shardy.with_mesh(None, target.shape)})
    texts = [_sdy_sharding(target, s, ir.RankedTensorType(t).rank)
             for s, t in zip(layouts + [None] * len(walk.packs), inputs)]
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
        [ir.DictAttr.get({"mhlo.frontend_attributes": _frontend({"xla.sdy.sharding": text})}) for text in texts]
    )
    if device is not None and isinstance(device.pjrt, pjrt.MeshTarget):
        i32 = ir.IntegerType.get_signless(32)
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, len(device.pjrt.devices))
        module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)


def _frontend(values: dict[str, str]) -> ir.DictAttr:
    return ir.DictAttr.get({k: ir.StringAttr.get(v) for k, v in values.items()})


def _sdy_sharding(target, sharding, rank: int) -> str:
    """An argument's ``#sdy.sharding`` (:mod:`lazycore.passes.lowering.shardy`);
    scalar packs and values without a layout are replicated."""
    axes = ((),) * rank if sharding is None else target.axes(sharding, rank)
    if axes is None:
        raise ValueError(f"lazycore has no Shardy spelling of the layout {sharding} over {target}: "
                         f"its devices are in another order than the mesh's")
    return shardy.tensor(target.shape, axes)


@_locked
def lower_walk(walk, device, donate: dict[int, int], pipeline: str | None,
               stacked: bool | str = False, context: ir.Context | None = None) -> tuple[ir.Module, tuple]:
    """The walk as a StableHLO module through ``pipeline`` (None: the
    platform's default, :func:`~lazycore.passes.pipeline.default_for`), and
    its plan: :attr:`Returned.arguments`, :attr:`Returned.rows` and whether
    it keeps its stacks (``Executable.keeps``); raises
    :class:`~lazycore.runtime.failures.ProgramError`. ``donate``:
    device-data parameter -> output of the walk; ``stacked``:
    :func:`build_program`'s, its stack arguments donated unless it is
    ``"keep"`` (values that live handles hold are passed as they are);
    ``context``: :func:`build_program`'s."""
    # (the device is in the program's key, so the option it sets and its default pipeline are too)
    passes = for_platform(pipeline or default_for(device.platform), device.platform)
    with events.timed("lowering"), heap.collector_paused():
        try:
            module, info = build_program(walk, device, stacked=stacked, donate=donate, flag_vector=True,
                                         context=context)
            if device.platform != "cpu":  # the factorizations' lowerings read it (passes/lowering/lapack.py)
                module.operation.attributes["lazy.platform"] = ir.StringAttr.get(device.platform)
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
                aliases, donors = _donation(donate, info, stacked != "keep")
                lower(module, passes, donate=aliases, donors=donors, **observe)
            for w in watchers:
                w.finish(module)
        except Exception as e:
            raise ProgramError("lower", e) from e
    return module, (info.arguments, info.rows, stacked == "keep" and info.arguments is not None)


def _donation(donate: dict[int, int], info: Returned, stacks: bool = True) -> tuple[dict[int, int], list[int]]:
    """``donate`` (parameter -> output of the walk) and, with ``stacks``, the
    stack arguments as argument -> result aliases, and the donors whose
    result XLA picks (a stack no loop wrote back in place)."""
    aliases = {}
    for i, j in donate.items():
        # (a stacked parameter or an output returned in a stack has no buffer of its own)
        if info.at[i] >= 0 and info.results[j] >= 0:
            aliases[info.at[i]] = info.results[j]
    donors = []
    for a, entry in enumerate(info.arguments if stacks and info.arguments else ()):
        if type(entry) is int:
            continue
        j = info.stack_results.get(a)
        if j is not None and j not in aliases.values():
            aliases[a] = j
        else:
            donors.append(a)
    return dict(sorted(aliases.items())), donors


def _compile(compile_fn, *args, counter: str = "compiles") -> pjrt.Executable:
    with events.timed("compile"):
        try:
            exe = compile_fn(*args)
        except Exception as e:
            raise ProgramError("compile", e) from e
    events.bump(counter)
    return exe


@_locked
def compile_walk(walk, device, donate: dict[int, int], pipeline: str | None, stacked: bool | str = False,
                 counter: str = "compiles"):
    """The walk's program; raises :class:`~lazycore.runtime.failures.ProgramError`.
    ``counter``: the one it counts in (:data:`lazycore.ir.events.COUNTERS`)."""
    # a barrier's module lives in this call only (or in its error): a lent context
    # (CONTEXTS), given up if lowering or compiling raised
    with CONTEXTS.lend() as ctx:
        module, plan = lower_walk(walk, device, donate, pipeline, stacked, ctx)
        exe = _compile(compile_stablehlo, module, device.pjrt, counter=counter)
    exe.arguments, exe.rows, exe.keeps = plan
    return exe


@_locked
def walk_artifact(walk, device, donate: dict[int, int], pipeline: str | None,
                  stacked: bool | str = False) -> tuple[bytes, tuple, tuple, tuple]:
    """The walk lowered to a portable StableHLO artifact, with its input and
    output types and :func:`lower_walk`'s plan; raises
    :class:`~lazycore.runtime.failures.ProgramError`."""
    with CONTEXTS.lend() as ctx:  # as compile_walk's
        module, plan = lower_walk(walk, device, donate, pipeline, stacked, ctx)
        try:  # as compile_walk does it, in its compile stage
            return stablehlo_artifact(module) + (plan,)
        except Exception as e:
            raise ProgramError("compile", e) from e


@_locked
def compile_artifact(artifact: bytes, inputs, outputs, device, plan: tuple = (None, None, False),
                     counter: str = "compiles") -> pjrt.Executable:
    """:func:`walk_artifact`'s artifact compiled for ``device``."""
    exe = _compile(pjrt.compile_artifact, artifact, inputs, outputs, device.pjrt, counter=counter)
    exe.arguments, exe.rows, exe.keeps = plan
    return exe
