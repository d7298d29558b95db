"""Lowerings of the factorizations (see lazycore.dialect.factorizations).

On the CPU each op is a ``stablehlo.custom_call`` of the LAPACK handler
jaxlib registers with XLA (``lapack_spotrf_ffi``, ``lapack_dgetrf_ffi``, ...),
built as jax 0.10's ``jax._src.lax.linalg`` builds it: the typed FFI
(its settings in an ``mhlo.backend_config`` dictionary), column-major
layouts for the batch of matrices (LAPACK's Fortran order; XLA transposes
around the call), the matrix operand aliased to its result, and the batch's
rank in ``mhlo.frontend_attributes``. The runtime initializes jaxlib's LAPACK
table before it loads a program that calls one (:mod:`lazycore.runtime.pjrt`).
StableHLO's own ``cholesky`` is correct there too, but XLA expands it into a
loop that takes 5 ms at n=64 where LAPACK takes 20 us.

The platform is the module's ``lazy.platform`` attribute, which the compiler
sets for every device but the CPU (absent: the CPU, as for ``lazy-opt``).
Elsewhere ``cholesky`` and ``triangular_solve`` lower to StableHLO's ops
(``pivots_to_permutation`` is StableHLO everywhere)
(``cholesky``'s info is 1 where the factor has a NaN: StableHLO's op says
nothing else), and the other ops decline: frontends do not record them
there (``LAPACK_PLATFORMS``).
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import TensorType, attr
from lazycore.dialect.factorizations import LAPACK_PLATFORMS
from lazycore.dialect.mlir import ir, stablehlo
from lazycore.dialect.types import is_complex

from . import hlo
from .registry import Decline, lowering

PLATFORM_ATTR = "lazy.platform"
_PREFIX = {"f32": "s", "f64": "d", "complex<f32>": "c", "complex<f64>": "z"}


def platform(op) -> str:
    """The platform ``op``'s module is compiled for (its ``lazy.platform``; absent: ``cpu``)."""
    parent = op.operation
    while parent is not None and parent.name != "builtin.module":
        parent = parent.parent
        parent = None if parent is None else parent.operation
    if parent is None or PLATFORM_ATTR not in parent.attributes:
        return "cpu"
    return ir.StringAttr(parent.attributes[PLATFORM_ATTR]).value


def _on_lapack(op) -> bool:
    return platform(op) in LAPACK_PLATFORMS


def _lapack_only(op):
    if not _on_lapack(op):
        raise Decline(f"{op.name} lowers to LAPACK, on {', '.join(LAPACK_PLATFORMS)} only, "
                      f"not on {platform(op)}")


def _layout(rank: int, matrix: bool) -> ir.Attribute:
    """Minor-to-major dims: column-major matrices with the batch outermost, else row-major."""
    dims = [rank - 2, rank - 1] + list(range(rank - 3, -1, -1)) if matrix else list(range(rank - 1, -1, -1))
    return ir.DenseElementsAttr.get(np.array(dims, dtype=np.int64), type=ir.RankedTensorType.get(
        [rank], ir.IndexType.get()))


def _u8(char: str) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(char))


def ffi_call(target: str, operands, results, config: dict[str, ir.Attribute], aliases=None) -> list[ir.Value]:
    """A LAPACK FFI handler's custom call as jax 0.10 writes it (``results``:
    TensorTypes; ``aliases``: operand -> result index). The typed FFI is
    told by the ``mhlo.backend_config`` dictionary, with ``api_version`` 1
    and an empty ``backend_config`` beside it, as jax leaves them."""
    top = max(hlo.type_of(v).rank for v in operands)
    single = len(results) == 1
    attributes = {
        "call_target_name": ir.StringAttr.get(target),
        "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        "backend_config": ir.StringAttr.get(""),
        "mhlo.backend_config": ir.DictAttr.get(config),
        "operand_layouts": ir.ArrayAttr.get(
            [_layout(hlo.type_of(v).rank, hlo.type_of(v).rank == top) for v in operands]),
        "result_layouts": ir.ArrayAttr.get([_layout(r.rank, r.rank == top) for r in results]),
        "mhlo.frontend_attributes": ir.DictAttr.get({"num_batch_dims": ir.StringAttr.get(str(top - 2))}),
    }
    if aliases:
        attributes["output_operand_aliases"] = ir.ArrayAttr.get([
            ir.Attribute.parse(f"#stablehlo.output_operand_alias<output_tuple_indices = [{'' if single else r}], "
                               f"operand_index = {o}, operand_tuple_indices = []>")
            for o, r in aliases.items()])
    call = hlo.op("custom_call", list(operands), list(results), **attributes)
    return list(call.results)


def _target(name: str, x: ir.Value) -> str:
    return f"lapack_{_PREFIX[hlo.type_of(x).dtype]}{name}_ffi"


def _lower_triangle(x: ir.Value) -> ir.Value:
    """``x`` with its matrices' strict upper triangles zeroed."""
    t = hlo.type_of(x)
    rows = hlo.value("iota", [], TensorType(t.shape, "i32"), iota_dimension=hlo.i64(t.rank - 2))
    cols = hlo.value("iota", [], TensorType(t.shape, "i32"), iota_dimension=hlo.i64(t.rank - 1))
    return hlo.select(hlo.compare(rows, cols, "GE"), x, hlo.splat_like(0, x))


@lowering("cholesky")
def _cholesky(op, rewriter):
    x = op.operands[0]
    t, info_t = (hlo.type_of(r) for r in op.results)
    if _on_lapack(op):
        factor, info = ffi_call(_target("potrf", x), [x], [t, info_t], {"uplo": _u8("L")}, {0: 0})
    else:
        factor = hlo.value("cholesky", [x], t, lower=hlo.boolean(True))
        info = hlo.convert(_any_per_matrix(hlo.compare(factor, factor, "NE"), info_t), "i32")
    return _lower_triangle(factor), info


def _any_per_matrix(flags: ir.Value, info_t: TensorType) -> ir.Value:
    """Per matrix of the i1 ``flags``, whether any is set."""
    rank = hlo.type_of(flags).rank
    scalar = TensorType((), "i1")
    reduced = hlo.with_body("reduce", [flags, hlo.constant(np.array(False))], [TensorType(info_t.shape, "i1")],
                            [scalar, scalar], lambda a, b: [hlo.binary("or", a, b)],
                            dimensions=hlo.i64s([rank - 2, rank - 1]))
    return reduced.result


@lowering("lu")
def _lu(op, rewriter):
    _lapack_only(op)
    x = op.operands[0]
    factor, ipiv, info = ffi_call(_target("getrf", x), [x], [hlo.type_of(r) for r in op.results], {}, {0: 0})
    return factor, hlo.binary("subtract", ipiv, hlo.splat_like(1, ipiv)), info


@lowering("pivots_to_permutation")
def _pivots_to_permutation(op, rewriter):
    """As jax's ``lu_pivots_to_permutation`` on the CPU: one loop over the
    swaps, each a select over the batch's rows."""
    pivots, perm_t = op.operands[0], hlo.type_of(op.results[0])
    rank, k = perm_t.rank, hlo.type_of(pivots).shape[-1]

    def swap(i, carried):
        perm, piv = carried
        zero = hlo.constant(np.array(0, np.int32))
        column = TensorType(perm_t.shape[:-1] + (1,), "i32")
        j = hlo.value("dynamic_slice", [piv] + [zero] * (rank - 1) + [i], column, slice_sizes=hlo.i64s(column.shape))
        rows = _iota(perm_t)
        at_i = hlo.compare(rows, _spread(i, perm_t, ()), "EQ")
        at_j = hlo.compare(rows, _spread(j, perm_t, range(rank)), "EQ")
        row_i, row_j = (_spread(_pick(at, perm), perm_t, range(rank - 1)) for at in (at_i, at_j))
        return [hlo.select(at_i, row_j, hlo.select(at_j, row_i, perm)), piv]

    return hlo.counted_loop(k, [_iota(perm_t), pivots], swap)[0]


def _iota(t: TensorType) -> ir.Value:
    return hlo.value("iota", [], t, iota_dimension=hlo.i64(t.rank - 1))


def _spread(x: ir.Value, t: TensorType, dims) -> ir.Value:
    return hlo.value("broadcast_in_dim", [x], t, broadcast_dimensions=hlo.i64s(list(dims)))


def _pick(where: ir.Value, x: ir.Value) -> ir.Value:
    """Per row of ``x`` (last dim), the one element ``where`` marks."""
    t = hlo.type_of(x)
    scalar = TensorType((), t.dtype)
    masked = hlo.select(where, x, hlo.splat_like(0, x))
    return hlo.with_body("reduce", [masked, hlo.constant(np.array(0, np.int32))], [TensorType(t.shape[:-1], t.dtype)],
                         [scalar, scalar], lambda a, b: [hlo.binary("add", a, b)],
                         dimensions=hlo.i64s([t.rank - 1])).result


@lowering("geqrf")
def _geqrf(op, rewriter):
    _lapack_only(op)
    x = op.operands[0]
    return ffi_call(_target("geqrf", x), [x], [hlo.type_of(r) for r in op.results], {}, {0: 0})


@lowering("householder_product")
def _householder_product(op, rewriter):
    _lapack_only(op)
    a, taus = op.operands
    name = "ungqr" if is_complex(hlo.type_of(a).dtype) else "orgqr"
    return ffi_call(_target(name, a), [a, taus], [hlo.type_of(op.results[0])], {}, {0: 0})


@lowering("eigh")
def _eigh(op, rewriter):
    _lapack_only(op)
    x = op.operands[0]
    name = "heevd" if is_complex(hlo.type_of(x).dtype) else "syevd"
    config = {"mode": _u8("V"), "uplo": _u8("L" if attr(op, "lower") else "U")}
    return ffi_call(_target(name, x), [x], [hlo.type_of(r) for r in op.results], config, {0: 0})


@lowering("svd")
def _svd(op, rewriter):
    _lapack_only(op)
    x = op.operands[0]
    s_t, u_t, vt_t, info_t = (hlo.type_of(r) for r in op.results)
    config = {"mode": _u8("A" if attr(op, "full_matrices") else "S")}
    _, s, u, vt, info = ffi_call(_target("gesdd", x), [x], [hlo.type_of(x), s_t, u_t, vt_t, info_t], config, {0: 0})
    return s, u, vt, info


@lowering("triangular_solve")
def _triangular_solve(op, rewriter):
    a, b = op.operands
    return hlo.value(
        "triangular_solve", [a, b], op.results[0].type,
        left_side=hlo.boolean(attr(op, "left_side")), lower=hlo.boolean(attr(op, "lower")),
        unit_diagonal=hlo.boolean(attr(op, "unit_diagonal")),
        transpose_a=stablehlo.TransposeAttr.get(attr(op, "transpose_a")),
    )
