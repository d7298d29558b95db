"""Lowerings of shardings and collectives (see lazycore.dialect.collectives).

They produce what jax 0.10 hands XLA for ``with_sharding_constraint`` and
``shard_map`` under the Shardy partitioner, in Shardy's round-trip form
(what XLA itself writes into HLO and imports back before partitioning): the
StableHLO bindings lazycore builds with have no ``sdy`` dialect, and a
portable artifact carries only StableHLO, so the ``sdy`` attributes travel
as strings in ``mhlo.frontend_attributes``:

- the module declares each mesh it uses in ``xla.sdy.meshes``
  (``{mesh_2x2 = #sdy.mesh<["a0"=2, "a1"=2]>}``: one symbol per mesh shape,
  its axes named by position, ``a0`` first; a mesh's devices are the
  program's device assignment, which the runtime makes the mesh's devices
  in row-major order, so the mesh needs no ``device_ids``);
- ``lazy.shard`` is ``stablehlo.custom_call @Sharding`` with
  ``xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh_2x2, [{"a0"}, {}]>]>"``
  (XLA makes it an ``sdy.sharding_constraint``);
- a collective runs on each device's block inside a manual computation:
  ``@xla.sdy.GlobalToLocalShape`` (``xla.sdy.in_shardings``,
  ``xla.sdy.manual_axes``), a call to a private function of its own whose
  name starts ``xla.sdy.manual_computation_body`` (``inlineable = "false"``),
  ``@xla.sdy.LocalToGlobalShape`` (``xla.sdy.manual_axes``,
  ``xla.sdy.out_shardings``); every mesh axis is manual in it, as the
  block is each device's own.

Device ids in replica groups are positions in the program's device
assignment. :func:`hlo_sharding` gives GSPMD's text for the same layouts
(``test_ops_collectives`` checks it against jax's).
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import TensorType, attr, tensor_type
from lazycore.dialect.collectives import check_pairs, result_sharding
from lazycore.dialect.mlir import ir

from . import hlo, shardy
from .registry import lowering
from .reduction import REDUCERS

def hlo_sharding(mesh, sharding) -> str:
    """XLA's text for a value of rank ``len(sharding)`` laid out over ``mesh``:
    a tile per device, tiles ordered by the split axes, the other axes
    replicating each tile (``last_tile_dim_replicate``)."""
    mesh, sharding = tuple(mesh), tuple(sharding)
    split = [a for a in sharding if a >= 0]
    if not any(mesh[a] > 1 for a in split):
        return "{replicated}"
    rest = [a for a in range(len(mesh)) if a not in split]
    tiles = [mesh[a] if a >= 0 else 1 for a in sharding]
    replicas = int(np.prod([mesh[a] for a in rest], dtype=np.int64))
    ids = np.arange(int(np.prod(mesh, dtype=np.int64))).reshape(mesh).transpose(split + rest).reshape(-1)
    dims = tiles + ([replicas] if replicas > 1 else [])
    text = f"devices=[{','.join(map(str, dims))}]{','.join(map(str, ids))}"
    return "{" + text + (" last_tile_dim_replicate" if replicas > 1 else "") + "}"


def local_type(t: TensorType, mesh, sharding) -> TensorType:
    """The block of ``t`` one device holds."""
    shape = tuple(n // mesh[a] if a >= 0 else n for n, a in zip(t.shape, sharding))
    return TensorType(shape, t.dtype)


def groups(mesh, axis: int) -> np.ndarray:
    """The devices along mesh axis ``axis``, one row per position on the other axes."""
    ids = np.arange(int(np.prod(mesh, dtype=np.int64)), dtype=np.int64).reshape(tuple(mesh))
    return np.moveaxis(ids, axis, -1).reshape(-1, mesh[axis])


def frontend_attributes(**values: str) -> ir.DictAttr:
    """``mhlo.frontend_attributes``: XLA keeps them on the HLO instruction,
    where Shardy's round-trip import reads them."""
    return ir.DictAttr.get({k.replace("__", "."): ir.StringAttr.get(v) for k, v in values.items()})


def module_of(op) -> ir.Operation:
    parent = op.operation.parent
    while parent is not None and parent.name != "builtin.module":
        parent = parent.parent
    if parent is None:
        raise ValueError(f"{op.name} is outside a module: the Shardy mesh it uses has nowhere to be declared")
    return parent.operation


_FRONTEND = "mhlo.frontend_attributes"


def _frontend(module: ir.Operation) -> dict:
    """``module``'s frontend attributes, by name."""
    attrs = module.attributes
    if _FRONTEND not in attrs:
        return {}
    d = ir.DictAttr(attrs[_FRONTEND])
    return {d[i].name: d[i].attr for i in range(len(d))}


def _declared(frontend: dict) -> str | None:
    """The :data:`shardy.MESHES` value in ``frontend``; None: no mesh declared."""
    return ir.StringAttr(frontend[shardy.MESHES]).value if shardy.MESHES in frontend else None


def declare_mesh(module: ir.Operation, mesh) -> str:
    """Declare the Shardy mesh of shape ``mesh`` on ``module`` (once); its symbol."""
    attrs = module.attributes
    frontend = _frontend(module)
    declared = _declared(frontend)
    now = shardy.with_mesh(declared, mesh)
    if now != declared:
        frontend[shardy.MESHES] = ir.StringAttr.get(now)
        attrs[_FRONTEND] = ir.DictAttr.get(frontend)
    return shardy.mesh_symbol(mesh)


def _string(text: str) -> ir.StringAttr:
    return ir.StringAttr.get(text)


def custom_call(target: str, x: ir.Value, result, side_effect: bool = False, **frontend: str) -> ir.Value:
    extra = {"has_side_effect": ir.BoolAttr.get(True)} if side_effect else {}
    return hlo.value(
        "custom_call", [x], result,
        call_target_name=_string(target), backend_config=_string(""),
        **extra, **{_FRONTEND: frontend_attributes(**frontend)},
    )


def constrain(x: ir.Value, mesh, sharding) -> ir.Value:
    """``x`` with a sharding constraint (jax's ``with_sharding_constraint``)."""
    return custom_call("Sharding", x, x.type, xla__sdy__sharding=shardy.per_value(shardy.of_spec(mesh, sharding)))


def partitioned(op) -> bool:
    """``op`` is in a program over several devices (``mhlo.num_partitions`` above 1)."""
    attrs = module_of(op).attributes
    return "mhlo.num_partitions" in attrs and ir.IntegerAttr(attrs["mhlo.num_partitions"]).value > 1


def whole_along(op, x: ir.Value, dims=(-1,)) -> ir.Value:
    """``x`` constrained whole along ``dims`` (each device holds every element
    along them; the other dimensions left to the partitioner), in a program
    over one mesh of several devices; else ``x``. For lowerings that cut a
    dimension into eager's order of pieces: over a sharded one each cut
    crossing a device's block is a collective of its own (F.cross_entropy's
    mean over a batch split by a mesh: 1 all-gather and 9 collective-permutes
    on 2 devices, 15 on 4), where this gathers it once."""
    if not partitioned(op):
        return x
    meshes = shardy.declared_meshes(_declared(_frontend(module_of(op))))
    if len(meshes) != 1:
        return x
    text = shardy.whole_along(meshes[0], hlo.type_of(x).rank, dims)
    return custom_call("Sharding", x, x.type, xla__sdy__sharding=shardy.per_value(text))


@lowering("shard")
def _shard(op, rewriter):
    mesh = attr(op, "mesh")
    declare_mesh(module_of(op), mesh)
    return constrain(op.operands[0], mesh, attr(op, "sharding"))


def _result_sharding(op) -> tuple[int, ...]:
    name = op.name.removeprefix("lazy.")
    return result_sharding(name, {n: attr(op, n) for n in _ATTRS[name]})


_ATTRS = {
    "all_reduce": ("sharding", "axis"),
    "all_gather": ("sharding", "axis"),
    "reduce_scatter": ("sharding", "axis", "dim"),
    "all_to_all": ("sharding", "axis", "split_dim", "concat_dim"),
    "collective_permute": ("sharding",),
}

BODY = "xla.sdy.manual_computation_body"
"""XLA's round-trip import makes a manual computation of each call to a
function whose name holds this (one function per call)."""


def _body_function(module: ir.Operation, block: TensorType, result: TensorType, build) -> str:
    """A private function of its own, ``block -> result``, whose body
    ``build(argument)`` makes; its symbol."""
    taken = {ir.StringAttr(o.attributes["sym_name"]).value for o in module.regions[0].blocks[0].operations
             if "sym_name" in o.attributes}
    n = 0
    while f"{BODY}_{n}" in taken:
        n += 1
    name = f"{BODY}_{n}"
    arg_t, res_t = tensor_type(block), tensor_type(result)
    fn = ir.Operation.create(
        "func.func", regions=1,
        attributes={"sym_name": _string(name), "sym_visibility": _string("private"),
                    "function_type": ir.TypeAttr.get(ir.FunctionType.get([arg_t], [res_t]))},
        ip=ir.InsertionPoint(module.regions[0].blocks[0]),
    )
    body = fn.regions[0].blocks.append(arg_t)
    with ir.InsertionPoint(body):
        ir.Operation.create("func.return", operands=[build(body.arguments[0])])
    return name


def _manual(op, build, result: TensorType) -> ir.Value:
    """``op``'s result: ``build`` run on each device's block of the operand
    (a manual computation over every mesh axis), giving the device's block of
    the result (of type ``result``), laid out as the op says."""
    x = op.operands[0]
    mesh, sharding = attr(op, "mesh"), attr(op, "sharding")
    if int(np.prod(mesh, dtype=np.int64)) == 1:
        # one device's block is the value, and XLA runs no partitioner for one
        # partition (nothing would take the manual computation apart): the
        # collective on the value itself, as jax lowers shard_map on one device
        return build(x)
    module = module_of(op)
    declare_mesh(module, mesh)
    axes = shardy.manual_axes(mesh)
    block_t = local_type(hlo.type_of(x), mesh, sharding)
    local = custom_call(
        "xla.sdy.GlobalToLocalShape", x, block_t, side_effect=True,
        xla__sdy__in_shardings=shardy.per_value(shardy.of_spec(mesh, sharding)), xla__sdy__manual_axes=axes,
    )
    name = _body_function(module, block_t, result, build)
    called = ir.Operation.create(
        "func.call", results=[tensor_type(result)], operands=[local],
        attributes={"callee": ir.FlatSymbolRefAttr.get(name), _FRONTEND: frontend_attributes(inlineable="false")},
    ).result
    return custom_call(
        "xla.sdy.LocalToGlobalShape", called, op.results[0].type, side_effect=True,
        xla__sdy__manual_axes=axes, xla__sdy__out_shardings=shardy.per_value(shardy.of_spec(mesh, _result_sharding(op))),
    )


def _collective_attrs(op) -> dict:
    """The attributes jax gives a collective in ``shard_map``: one channel for
    all, and replica groups of device ids (``all_to_all`` has no
    ``use_global_device_ids``: with a channel its groups are device ids already)."""
    out = {"channel_handle": ir.Attribute.parse("#stablehlo.channel_handle<handle = 1, type = 1>")}
    if op.name != "lazy.collective_permute":
        out["replica_groups"] = hlo.constant_attr(groups(attr(op, "mesh"), attr(op, "axis")))
    if op.name not in ("lazy.collective_permute", "lazy.all_to_all"):
        out["use_global_device_ids"] = ir.UnitAttr.get()
    return out


def _result_block(op) -> TensorType:
    """The block of ``op``'s result one device holds."""
    return local_type(hlo.type_of(op.results[0]), attr(op, "mesh"), _result_sharding(op))


def _combiner(op, t: TensorType):
    name = {"sum": "reduce_sum", "prod": "reduce_prod", "max": "reduce_max", "min": "reduce_min"}[attr(op, "reduction")]
    combiner = REDUCERS[name][0]
    scalar = TensorType((), t.dtype)
    return [scalar, scalar], lambda a, b: [hlo.binary(combiner, a, b)]


@lowering("all_reduce")
def _all_reduce(op, rewriter):
    t = local_type(hlo.type_of(op.operands[0]), attr(op, "mesh"), attr(op, "sharding"))
    args, body = _combiner(op, t)
    # every device of a group holds the combined block: the result's dimension is one block
    return _manual(op, lambda block: hlo.with_body("all_reduce", [block], [t], args, body,
                                                   **_collective_attrs(op)).result, t)


@lowering("all_gather")
def _all_gather(op, rewriter):
    out = _result_block(op)
    return _manual(op, lambda block: hlo.value(
        "all_gather", [block], out,
        all_gather_dim=hlo.i64(list(attr(op, "sharding")).index(attr(op, "axis"))), **_collective_attrs(op),
    ), out)


@lowering("reduce_scatter")
def _reduce_scatter(op, rewriter):
    t = local_type(hlo.type_of(op.operands[0]), attr(op, "mesh"), attr(op, "sharding"))
    args, body = _combiner(op, t)
    out = _result_block(op)
    return _manual(op, lambda block: hlo.with_body(
        "reduce_scatter", [block], [out], args, body,
        scatter_dimension=hlo.i64(attr(op, "dim")), **_collective_attrs(op),
    ).result, out)


@lowering("all_to_all")
def _all_to_all(op, rewriter):
    out = _result_block(op)
    return _manual(op, lambda block: hlo.value(
        "all_to_all", [block], out,
        split_dimension=hlo.i64(attr(op, "split_dim")), concat_dimension=hlo.i64(attr(op, "concat_dim")),
        split_count=hlo.i64(attr(op, "mesh")[attr(op, "axis")]), **_collective_attrs(op),
    ), out)


@lowering("collective_permute")
def _collective_permute(op, rewriter):
    mesh, axis = attr(op, "mesh"), attr(op, "axis")
    pairs = [(int(g[s]), int(g[t])) for g in groups(mesh, axis) for s, t in check_pairs(attr(op, "pairs"), mesh[axis])]
    t = local_type(hlo.type_of(op.operands[0]), mesh, attr(op, "sharding"))
    return _manual(op, lambda block: hlo.value(
        "collective_permute", [block], t,
        source_target_pairs=hlo.constant_attr(np.array(pairs, np.int64).reshape(-1, 2)),
        **_collective_attrs(op),
    ), t)
