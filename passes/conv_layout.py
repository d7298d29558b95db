"""``lazy-channels-last``: convolutions in the layout XLA's CPU backend runs,
and that layout kept between them.

torch's convolutions are N, C, spatial (``lazy.convolution`` fixes that
layout), while XLA's CPU convolution library takes the input as N, spatial,
C, the kernel as spatial, I, O and gives N, spatial, C. XLA's own
``ConvCanonicalization`` wraps every other convolution in transposes, and
nothing in XLA moves them: batch norm, ReLU and the residual adds between two
convolutions then run N, C, spatial and each convolution transposes its
input and output again (ResNet-18's step at 4x3x64x64: about 110 of 240 ms of
kernel time in ``transpose`` and ``copy`` kernels).

This pass runs on StableHLO, after ``lazy-to-stablehlo``: there a
convolution's layout is its dimension numbers, so a channels-last
convolution needs no new ``lazy`` op, and every op between two convolutions
(elementwise math, broadcasts of per-channel vectors, reductions, slices,
pads, reshapes, matrix products, the gradients' transposes) is one StableHLO
op whose dimensions can be renamed. It does what a jax user does by writing
N, H, W, C, decided per program:

1. every convolution becomes the canonical one (input ``[b, 0, 1, f]``,
   kernel ``[0, 1, i, o]``, output ``[b, 0, 1, f]``), a transpose of its
   operand folded into its dimension numbers rather than added to; with
   the option ``products=true`` a 1x1 one (one feature group) becomes a
   matrix product over the channels in that layout instead
   (``_Block._pointwise``: XLA runs it with its matrix kernels, not a
   convolution library; off by default, docs/guides/torch.md says why);
2. a value is carried as ``(physical value, permutation)``: the program's
   value is ``transpose(physical, permutation)``. Walking each block in
   order, an op whose operands are carried that way is rebuilt on the
   physical values with its dimensions renamed (its result is carried
   too), so the layout flows through the chain;
3. what needs the program's value (the function's results, an op with no
   rule here) gets one ``stablehlo.transpose`` of the physical value; a
   transpose that only moves dimensions of size 1 is a reshape.

An op is rebuilt when at least as many of its operands are already carried
in the layout as would need a transpose to join it (broadcasts, constants
and iotas are rebuilt in any layout at no cost), so no rewrite adds
transposes. Programs without a convolution are left as they are.

The convolutions give the same bits as with XLA's own transposes (their
library sees the same operands; a 1x1 convolution's product gave YNNPACK's
convolution's bits on this CPU, tests/zoo's resnet18 trained to the same
losses and state). The ops between them need not: XLA sums a
reduction in another order over N, H, W, C than over N, C, H, W, and its CPU
backend contracts a multiply and an add into one fused multiply-add where
its generated loop allows. With float32 sums a batch norm's statistics moved
whole channels by an ulp between the layouts, and over training steps of a
network whose batch norm sees few numbers (tests/zoo's resnet18, 4 images of
64x64) the two trainings ended 4.3e-4 apart. Batch norm's statistics are
float64 sums on the CPU (``frontends/torch/ops/moments.py``, as eager's CPU
kernel sums them), one rounding of a nearly exact sum: its forward is the
same bits in either layout, and the two trainings end 2.0e-6 apart. Its
backward's two sums are eager's per-image lane sums added into a float64, or
float64 sums rounded once (``frontends/torch/ops/conv.py``'s
``native_batch_norm_backward``), elementwise steps either way, so its
gradients are the same bits in either layout as well.

The pass is in the CPU's default pipeline (``CHANNELS_LAST_PIPELINE``, chosen
by :func:`lazycore.passes.pipeline.default_for` when ``lazycore.config``
names no pipeline); ``configure(pipeline=DEFAULT_PIPELINE)`` turns it off.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from lazycore.dialect.mlir import ir, stablehlo

from .catalog import register_pass
from .lowering.linalg import xla_would_swap

Perm = tuple

# ops computing each element from the elements at the same position of
# operands of the result's shape (scalar operands of clamp and select aside)
ELEMENTWISE = frozenset("stablehlo." + n for n in """
    abs add and atan2 bitcast_convert cbrt ceil clamp compare complex convert cosine count_leading_zeros divide
    exponential exponential_minus_one floor imag is_finite log log_plus_one logistic maximum minimum multiply
    negate not or popcnt power real reduce_precision remainder round_nearest_afz round_nearest_even rsqrt select
    shift_left shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor
""".split())

_FREE_DEPTH = 3
"""How deep an expression of broadcasts, constants and iotas is rebuilt in a new layout."""


def _inverse(p: Sequence[int]) -> Perm:
    inv = [0] * len(p)
    for i, v in enumerate(p):
        inv[v] = i
    return tuple(inv)


def _compose(a: Sequence[int], b: Sequence[int]) -> Perm:
    """``transpose(transpose(x, a), b) == transpose(x, _compose(a, b))``."""
    return tuple(a[i] for i in b)


def _is_identity(p: Sequence[int]) -> bool:
    return all(i == v for i, v in enumerate(p))


def _shape(v: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(v.type).shape)


def _ranked(v: ir.Value) -> bool:
    return isinstance(v.type, ir.RankedTensorType)


def _with_shape(t: ir.Type, shape: Sequence[int]) -> ir.Type:
    rt = ir.RankedTensorType(t)
    return ir.RankedTensorType.get(list(shape), rt.element_type, rt.encoding, loc=ir.Location.unknown(t.context))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _i64s(values) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def _i64_array(op, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _permuted_shape(shape: Sequence[int], p: Sequence[int]) -> list[int]:
    """The shape of ``w`` where a value of ``shape`` is ``transpose(w, p)``."""
    inv = _inverse(p)
    return [shape[inv[j]] for j in range(len(p))]


def _unit_moves_only(shape: Sequence[int], p: Sequence[int]) -> bool:
    """``transpose(x, p)`` keeps the order of ``x``'s dimensions larger than 1: it is a reshape."""
    kept = [d for d in p if shape[d] != 1]
    return kept == sorted(kept)


def _reshape_through(p: Sequence[int], phys_shape: Sequence[int], zshape: Sequence[int]):
    """For ``reshape(transpose(x, p), zshape)`` (``x`` of ``phys_shape``), a shape
    ``w`` and a permutation ``q`` with the same value as ``transpose(reshape(x, w), q)``,
    or None. It exists when each run of dimensions the reshape merges is a
    run of ``x``'s dimensions in order (a split is always one dimension)."""
    yshape = [phys_shape[d] for d in p]
    if 0 in yshape or 0 in zshape:
        return None
    ynu = [i for i, s in enumerate(yshape) if s != 1]
    znu = [j for j, s in enumerate(zshape) if s != 1]
    groups, i, j = [], 0, 0
    while i < len(ynu) and j < len(znu):
        gy, gz = [ynu[i]], [znu[j]]
        py, pz = yshape[ynu[i]], zshape[znu[j]]
        i, j = i + 1, j + 1
        while py != pz:
            if py < pz:
                if i == len(ynu):
                    return None
                gy.append(ynu[i])
                py *= yshape[ynu[i]]
                i += 1
            else:
                if j == len(znu):
                    return None
                gz.append(znu[j])
                pz *= zshape[znu[j]]
                j += 1
        if len(gy) > 1 and len(gz) > 1:
            return None
        groups.append((gy, gz))
    if i != len(ynu) or j != len(znu):
        return None
    xnu = {d: k for k, d in enumerate(d for d, s in enumerate(phys_shape) if s != 1)}
    for gy, _ in groups:
        ks = [xnu[p[d]] for d in gy]
        if ks != list(range(ks[0], ks[0] + len(ks))):
            return None
    w, at = [], {}
    for _, gz in sorted(groups, key=lambda g: xnu[p[g[0][0]]]):
        for d in gz:
            at[d] = len(w)
            w.append(zshape[d])
    for d, s in enumerate(zshape):
        if s == 1:
            at[d] = len(w)
            w.append(1)
    return w, tuple(at[d] for d in range(len(zshape)))


class _Block:
    """One block's rewrite: ``laid`` maps a value of the program to
    ``(physical, permutation)``, the value being ``transpose(physical, permutation)``."""

    def __init__(self, block: ir.Block, products: bool = False):
        self.block = block
        self.products = products  # 1x1 convolutions as matrix products (:meth:`_pointwise`)
        self.laid: dict = {}
        self.rewritten: list = []  # original ops replaced by rebuilt ones, in order
        self.changed = False

    # --- building ------------------------------------------------------------------------

    def _before(self, op):
        return ir.InsertionPoint(op), op.location

    def _transpose(self, v: ir.Value, p: Sequence[int], at) -> ir.Value:
        """``transpose(v, p)`` built before ``at`` (a reshape when only dimensions of size 1 move)."""
        p = tuple(p)
        if _is_identity(p):
            return v
        shape = _shape(v)
        out = _with_shape(v.type, [shape[d] for d in p])
        ip, loc = self._before(at)
        with ip, loc:
            if _unit_moves_only(shape, p):
                return ir.Operation.create("stablehlo.reshape", results=[out], operands=[v]).result
            return ir.Operation.create("stablehlo.transpose", results=[out], operands=[v],
                                       attributes={"permutation": _i64s(p)}).result

    def _reshape(self, v: ir.Value, shape: Sequence[int], at) -> ir.Value:
        if list(shape) == _shape(v):
            return v
        ip, loc = self._before(at)
        with ip, loc:
            return ir.Operation.create("stablehlo.reshape", results=[_with_shape(v.type, shape)], operands=[v]).result

    def _rebuilt(self, op, operands, shapes, attributes=None, at=None):
        """A copy of ``op`` before ``at`` (default: before ``op``), on ``operands``, with results of
        ``shapes`` (and attributes replaced)."""
        new = op.clone(ip=ir.InsertionPoint(op if at is None else at))
        new = new.operation if hasattr(new, "operation") else new
        for i, v in enumerate(operands):
            new.operands[i] = v
        for r, shape in zip(new.results, shapes):
            r.set_type(_with_shape(r.type, shape))
        for name, value in (attributes or {}).items():
            new.attributes[name] = value
        return new

    # --- what a value is in a layout -------------------------------------------------------

    def physical(self, v: ir.Value):
        got = self.laid.get(v)
        if got is not None:
            return got
        return v, tuple(range(len(_shape(v)))) if _ranked(v) else ()

    def _free(self, v: ir.Value, depth: int = 0) -> bool:
        """``v`` can be made in any layout without transposing a large value."""
        owner = v.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)) or v in self.laid:
            return False
        owner = owner.operation
        name = owner.name
        if name in ("stablehlo.constant", "stablehlo.iota"):
            return True
        if name == "stablehlo.broadcast_in_dim":
            return 4 * _numel(_shape(owner.operands[0])) <= _numel(_shape(v))
        if name in ELEMENTWISE and depth < _FREE_DEPTH:
            return all(not _ranked(o) or len(_shape(o)) == 0 or self._free(o, depth + 1) for o in owner.operands)
        return False

    def to_layout(self, v: ir.Value, p: Perm, at, depth: int = 0) -> ir.Value:
        """A value ``w`` with ``v == transpose(w, p)``, built before ``at``."""
        if len(_shape(v)) == 0:
            return v
        got = self.laid.get(v)
        if got is not None:
            ph, q = got
            return self._transpose(ph, _compose(q, _inverse(p)), at)
        shape = _shape(v)
        wshape = _permuted_shape(shape, p)
        owner = v.owner
        name = owner.operation.name if isinstance(owner, (ir.Operation, ir.OpView)) else None
        if name == "stablehlo.constant":
            attr = owner.operation.attributes["value"]
            if isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
                splat = ir.DenseElementsAttr(attr).get_splat_value()
                t = _with_shape(v.type, wshape)
                ip, loc = self._before(at)
                with ip, loc:
                    return ir.Operation.create(
                        "stablehlo.constant", results=[t],
                        attributes={"value": ir.DenseElementsAttr.get_splat(t, splat)}).result
        elif name == "stablehlo.iota":
            d = ir.IntegerAttr(owner.operation.attributes["iota_dimension"]).value
            return self._rebuilt(owner.operation, [], [wshape], {
                "iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), p[d])}, at).results[0]
        elif name == "stablehlo.broadcast_in_dim" and self._free(v):
            src = owner.operation.operands[0]
            dims = [p[d] for d in _i64_array(owner.operation, "broadcast_dimensions")]
            order = sorted(range(len(dims)), key=lambda k: dims[k])
            src = self._transpose(src, order, at)
            return self._rebuilt(owner.operation, [src], [wshape],
                                 {"broadcast_dimensions": _i64s(sorted(dims))}, at).results[0]
        elif name in ELEMENTWISE and depth < _FREE_DEPTH and self._free(v, depth):
            ops = [o if len(_shape(o)) == 0 else self.to_layout(o, p, at, depth + 1) for o in owner.operation.operands]
            return self._rebuilt(owner.operation, ops, [wshape], None, at).results[0]
        return self._transpose(v, _inverse(p), at)

    # --- the walk --------------------------------------------------------------------------

    def run(self) -> None:
        for op in list(self.block.operations):
            op = op.operation
            rule = _RULES.get(op.name)
            if op.name in ELEMENTWISE:
                rule = _Block._elementwise
            if rule is not None and (op.name in _ALWAYS or any(v in self.laid for v in op.operands)):
                if rule(self, op):
                    continue
            if op.name != "stablehlo.reduce":
                for region in op.regions:
                    for block in region.blocks:
                        inner = _Block(block)
                        inner.run()
                        self.changed |= inner.changed
        self._finish()

    def _lay(self, op, new_values, perms) -> bool:
        """``op``'s results are ``transpose(new, perm)``: carried from here on."""
        self.changed = True
        for old, new, p in zip(op.results, new_values, perms):
            if _is_identity(p):
                old.replace_all_uses_with(new)
            else:
                self.laid[old] = (new, tuple(p))
        self.rewritten.append(op)
        return True

    def _finish(self) -> None:
        rewritten = set(self.rewritten)
        for op in self.rewritten:
            for v in op.results:
                got = self.laid.get(v)
                if got is None:
                    continue
                outside = [(u.owner, u.operand_number) for u in v.uses if _op(u.owner) not in rewritten]
                if not outside:
                    continue
                ph, p = got
                m = self._transpose(ph, p, op)
                for owner, i in outside:
                    _op(owner).operands[i] = m
        for op in reversed(self.rewritten):
            if all(not list(r.uses) for r in op.results):
                op.erase()

    def _majority(self, values) -> Perm | None:
        counts = Counter(self.laid[v][1] for v in set(values) if v in self.laid)
        return counts.most_common(1)[0][0] if counts else None

    def _worth(self, values, p: Perm) -> bool:
        """Moving ``values`` (of the layout's rank) into ``p`` costs fewer
        transposes than it saves. At a tie the op stays as it is: an
        optimizer's update of a weight from its gradient would otherwise take
        the gradient's layout, and its state and the weight would be
        transposed in and out again."""
        carried = costly = 0
        for v in set(values):
            got = self.laid.get(v)
            if got is not None and got[1] == p:
                carried += 1
            elif not self._free(v):
                costly += 1
        return carried > costly

    # --- rules ------------------------------------------------------------------------------

    def _operand(self, v: ir.Value):
        """A convolution's operand as ``(physical, permutation)``; a transpose
        before it folds into its dimension numbers."""
        t = _producer(v, "stablehlo.transpose")
        if v not in self.laid and t is not None:
            return t.operands[0], tuple(_i64_array(t, "permutation"))
        return self.physical(v)

    def _elementwise(self, op) -> bool:
        full = [v for v in op.operands if len(_shape(v)) > 0]
        p = self._majority(full)
        if p is None or any(len(_shape(v)) != len(p) for v in full) or not self._worth(full, p):
            return False
        if any(_shape(r) != _shape(full[0]) for r in op.results):
            return False
        ops = [v if len(_shape(v)) == 0 else self.to_layout(v, p, op) for v in op.operands]
        new = self._rebuilt(op, ops, [_permuted_shape(_shape(r), p) for r in op.results])
        return self._lay(op, new.results, [p] * len(op.results))

    def _transpose_rule(self, op) -> bool:
        # a transpose of a value in its own layout is carried too when it goes
        # on to a convolution: a chain of reshapes and transposes (a
        # transposed convolution's kernel, a weight gradient's operands) then
        # reaches it as one permutation. Other transposes (attention's heads)
        # are left where they are.
        if op.operands[0] not in self.laid and not _feeds_convolution(op.results[0]):
            return False
        ph, q = self.physical(op.operands[0])
        return self._lay(op, [ph], [_compose(q, _i64_array(op, "permutation"))])

    def _convolution(self, op) -> bool:
        if ir.IntegerAttr(op.attributes["batch_group_count"]).value != 1:
            return False
        dn = stablehlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
        x, w = op.operands
        xph, xp = self._operand(x)
        wph, wp = self._operand(w)
        sp = [xp[d] for d in dn.input_spatial_dimensions]
        n = len(sp)
        x_in = self._transpose(xph, [xp[dn.input_batch_dimension]] + sp + [xp[dn.input_feature_dimension]], op)
        w_in = self._transpose(wph, [wp[d] for d in dn.kernel_spatial_dimensions]
                               + [wp[dn.kernel_input_feature_dimension], wp[dn.kernel_output_feature_dimension]], op)
        out = _shape(op.results[0])
        ob, of, osp = dn.output_batch_dimension, dn.output_feature_dimension, list(dn.output_spatial_dimensions)
        canonical = [out[ob]] + [out[d] for d in osp] + [out[of]]
        r = [0] * (n + 2)
        r[ob], r[of] = 0, n + 1
        for k, d in enumerate(osp):
            r[d] = k + 1
        product = self._pointwise(op, x_in, w_in, canonical) if self.products else None
        if product is not None:
            return self._lay(op, [product], [tuple(r)])
        x_in = self._unfolded_pad(op, x_in, w_in)
        numbers = stablehlo.ConvDimensionNumbers.get(
            input_batch_dimension=0, input_feature_dimension=n + 1, input_spatial_dimensions=list(range(1, n + 1)),
            kernel_output_feature_dimension=n + 1, kernel_input_feature_dimension=n,
            kernel_spatial_dimensions=list(range(n)),
            output_batch_dimension=0, output_feature_dimension=n + 1, output_spatial_dimensions=list(range(1, n + 1)),
        )
        new = self._rebuilt(op, [x_in, w_in], [canonical], {"dimension_numbers": numbers})
        return self._lay(op, new.results, [tuple(r)])

    def _window(self, op, n: int):
        """``op``'s window as (padding pairs, strides, lhs dilation), defaults filled in."""
        window = ir.DenseIntElementsAttr(op.attributes["padding"]) if "padding" in op.attributes else None
        own = [[0, 0]] * n if window is None else [[int(window[2 * k]), int(window[2 * k + 1])] for k in range(n)]
        ones = [1] * n
        strides = _i64_array(op, "window_strides") if "window_strides" in op.attributes else ones
        lhs_dil = _i64_array(op, "lhs_dilation") if "lhs_dilation" in op.attributes else ones
        return own, strides, lhs_dil

    def _pointwise(self, op, x: ir.Value, w: ir.Value, canonical: Sequence[int]) -> ir.Value | None:
        """The canonical convolution of ``x`` (N, spatial, C) by a 1x1 kernel ``w``
        (1..., I, O) as a matrix product over channels, or None for any other
        convolution.

        XLA's CPU backend runs a product with YNNPACK's matrix kernels (with
        ``LIBRARY_FUSION_TYPE_DOT``) and a convolution with its convolution
        library, YNNPACK's or Eigen's (``pjrt.CPU_OPTIONS``): ResNet's
        bottleneck and downsample convolutions are 1x1, and Eigen's 1x1
        stride-2 forward is less accurate than a product. A window stride
        becomes a strided slice of the input first; base dilation and edge
        padding (an input gradient of a strided 1x1 convolution) a zero pad
        of the product, whose padded positions are zeros as eager's are."""
        n = len(canonical) - 2
        if ir.IntegerAttr(op.attributes["feature_group_count"]).value != 1 or any(k != 1 for k in _shape(w)[:n]):
            return None
        element = ir.RankedTensorType(op.results[0].type).element_type
        if not isinstance(element, ir.FloatType) or 0 in canonical or 0 in _shape(x):
            return None
        own, strides, lhs_dil = self._window(op, n)
        if any(v < 0 for pair in own for v in pair):
            return None
        ip, loc = self._before(op)
        with ip, loc:
            xs = _shape(x)
            if all(d == 1 for d in lhs_dil) and not any(v for pair in own for v in pair) and any(s != 1 for s in strides):
                # only every s-th position is read: slice them out before the product
                limit = [xs[0]] + [(o - 1) * s + 1 for o, s in zip(canonical[1:-1], strides)] + [xs[-1]]
                xs = [xs[0]] + list(canonical[1:-1]) + [xs[-1]]
                x = ir.Operation.create("stablehlo.slice", results=[_with_shape(x.type, xs)], operands=[x], attributes={
                    "start_indices": _i64s([0] * (n + 2)), "limit_indices": _i64s(limit),
                    "strides": _i64s([1] + list(strides) + [1])}).result
                strides = [1] * n
            ws = _shape(w)[n:]
            kernel = ir.Operation.create("stablehlo.reshape", results=[_with_shape(w.type, ws)], operands=[w]).result
            shape = xs[:-1] + [ws[1]]
            attributes = {"dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
                lhs_batching_dimensions=[], rhs_batching_dimensions=[],
                lhs_contracting_dimensions=[n + 1], rhs_contracting_dimensions=[0])}
            if "precision_config" in op.attributes:
                attributes["precision_config"] = op.attributes["precision_config"]
            y = ir.Operation.create("stablehlo.dot_general", results=[_with_shape(op.results[0].type, shape)],
                                    operands=[x, kernel], attributes=attributes).result
            if any(v for pair in own for v in pair) or any(d != 1 for d in lhs_dil):
                low, high = [0] + [p[0] for p in own] + [0], [0] + [p[1] for p in own] + [0]
                interior = [0] + [d - 1 for d in lhs_dil] + [0]
                shape = [s + lo + hi + max(s - 1, 0) * it for s, lo, hi, it in zip(shape, low, high, interior)]
                scalar = ir.RankedTensorType.get([], element)
                zero = ir.Operation.create("stablehlo.constant", results=[scalar], attributes={
                    "value": ir.DenseElementsAttr.get_splat(scalar, ir.FloatAttr.get(element, 0.0))}).result
                y = ir.Operation.create("stablehlo.pad", results=[_with_shape(y.type, shape)], operands=[y, zero],
                                        attributes={"edge_padding_low": _i64s(low), "edge_padding_high": _i64s(high),
                                                    "interior_padding": _i64s(interior)}).result
            if any(s != 1 for s in strides):
                limit = [shape[0]] + [(o - 1) * s + 1 for o, s in zip(canonical[1:-1], strides)] + [shape[-1]]
                y = ir.Operation.create("stablehlo.slice", results=[_with_shape(y.type, canonical)], operands=[y],
                                        attributes={"start_indices": _i64s([0] * (n + 2)),
                                                    "limit_indices": _i64s(limit),
                                                    "strides": _i64s([1] + list(strides) + [1])}).result
        assert _shape(y) == list(canonical), (_shape(y), canonical)
        return y

    def _unfolded_pad(self, op, x: ir.Value, w: ir.Value) -> ir.Value:
        """``x``, kept from being folded into the canonical convolution ``op`` will be when
        it is a zero pad whose folding would make XLA exchange the operands.

        The lowering pads such inputs explicitly (:func:`~lazycore.passes.lowering.linalg.xla_would_swap`);
        XLA folds a pad right before a convolution into its window, which its own
        transposes used to prevent. An optimization barrier keeps the pad apart
        (it is a no-op at run time: the pad is a kernel of its own either way)."""
        pad = _producer(x, "stablehlo.pad")
        if pad is None or ir.IntegerAttr(op.attributes["feature_group_count"]).value != 1:
            return x
        n = len(_shape(x)) - 2
        sp = range(1, n + 1)
        low, high = _i64_array(pad, "edge_padding_low"), _i64_array(pad, "edge_padding_high")
        interior = _i64_array(pad, "interior_padding")
        own, strides, lhs_dil = self._window(op, n)
        rhs_dil = _i64_array(op, "rhs_dilation") if "rhs_dilation" in op.attributes else [1] * n
        source = _shape(pad.operands[0])
        folded = [[low[d] + own[k][0], high[d] + own[k][1]] for k, d in enumerate(sp)]
        dilation = [(interior[d] + 1) * lhs_dil[k] for k, d in enumerate(sp)]
        if not xla_would_swap([source[d] for d in sp], _shape(w)[:n], folded, strides, dilation, rhs_dil):
            return x
        ip, loc = self._before(op)
        with ip, loc:
            return ir.Operation.create("stablehlo.optimization_barrier", results=[x.type], operands=[x]).result

    def _reduce(self, op) -> bool:
        k = len(op.results)
        inputs = list(op.operands[:k])
        p = self._majority(inputs)
        if p is None or not self._worth(inputs, p):
            return False
        dims = _i64_array(op, "dimensions")
        pdims = sorted(p[d] for d in dims)
        kept = [d for d in range(len(p)) if d not in dims]
        phys_kept = [j for j in range(len(p)) if j not in pdims]
        r = tuple(phys_kept.index(p[d]) for d in kept)
        phys_in = _permuted_shape(_shape(inputs[0]), p)
        ops = [self.to_layout(v, p, op) for v in inputs] + list(op.operands[k:])
        new = self._rebuilt(op, ops, [[phys_in[j] for j in phys_kept]] * k, {"dimensions": _i64s(pdims)})
        return self._lay(op, new.results, [r] * k)

    def _reshape_rule(self, op) -> bool:
        ph, p = self.laid[op.operands[0]]
        through = _reshape_through(p, _shape(ph), _shape(op.results[0]))
        if through is None:
            return False
        w, q = through
        return self._lay(op, [self._reshape(ph, w, op)], [q])

    def _broadcast(self, op) -> bool:
        ph, p = self.laid[op.operands[0]]
        dims = _i64_array(op, "broadcast_dimensions")
        inv = _inverse(p)
        c = [dims[inv[j]] for j in range(len(p))]  # the output dimension of each physical dimension
        s = sorted(c)
        r = list(range(len(_shape(op.results[0]))))
        for k, d in enumerate(c):
            r[d] = s[k]
        out = _shape(op.results[0])
        new = self._rebuilt(op, [ph], [_permuted_shape(out, r)], {"broadcast_dimensions": _i64s(s)})
        return self._lay(op, new.results, [tuple(r)])

    def _slice(self, op) -> bool:
        ph, p = self.laid[op.operands[0]]
        inv = _inverse(p)
        attrs = {a: _i64s([_i64_array(op, a)[inv[j]] for j in range(len(p))])
                 for a in ("start_indices", "limit_indices", "strides")}
        new = self._rebuilt(op, [ph], [_permuted_shape(_shape(op.results[0]), p)], attrs)
        return self._lay(op, new.results, [p])

    def _pad(self, op) -> bool:
        if op.operands[0] not in self.laid:
            return False
        ph, p = self.laid[op.operands[0]]
        inv = _inverse(p)
        attrs = {a: _i64s([_i64_array(op, a)[inv[j]] for j in range(len(p))])
                 for a in ("edge_padding_low", "edge_padding_high", "interior_padding")}
        new = self._rebuilt(op, [ph, op.operands[1]], [_permuted_shape(_shape(op.results[0]), p)], attrs)
        return self._lay(op, new.results, [p])

    def _reverse(self, op) -> bool:
        ph, p = self.laid[op.operands[0]]
        dims = sorted(p[d] for d in _i64_array(op, "dimensions"))
        new = self._rebuilt(op, [ph], [_shape(ph)], {"dimensions": _i64s(dims)})
        return self._lay(op, new.results, [p])

    def _concatenate(self, op) -> bool:
        values = list(op.operands)
        p = self._majority(values)
        if p is None or not self._worth(values, p):
            return False
        d = ir.IntegerAttr(op.attributes["dimension"]).value
        ops = [self.to_layout(v, p, op) for v in values]
        new = self._rebuilt(op, ops, [_permuted_shape(_shape(op.results[0]), p)],
                            {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), p[d])})
        return self._lay(op, new.results, [p])

    def _dot_general(self, op) -> bool:
        dn = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
        lhs, rhs = op.operands
        lph, lp = self.physical(lhs)
        rph, rp = self.physical(rhs)
        lb, lc = list(dn.lhs_batching_dimensions), list(dn.lhs_contracting_dimensions)
        rb, rc = list(dn.rhs_batching_dimensions), list(dn.rhs_contracting_dimensions)
        nb = len(lb)
        order = list(range(nb))
        for perm, rank, used in ((lp, len(lp), lb + lc), (rp, len(rp), rb + rc)):
            free = [d for d in range(rank) if d not in used]
            phys_free = sorted(perm[d] for d in free)
            start = len(order)
            order += [start + phys_free.index(perm[d]) for d in free]
        numbers = stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=[lp[d] for d in lb], rhs_batching_dimensions=[rp[d] for d in rb],
            lhs_contracting_dimensions=[lp[d] for d in lc], rhs_contracting_dimensions=[rp[d] for d in rc])
        new = self._rebuilt(op, [lph, rph], [_permuted_shape(_shape(op.results[0]), order)],
                            {"dot_dimension_numbers": numbers})
        return self._lay(op, new.results, [tuple(order)])


def _op(owner):
    return owner.operation if hasattr(owner, "operation") else owner


def _producer(v: ir.Value, name: str):
    owner = v.owner
    if isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.name == name:
        return owner.operation
    return None


_RULES = {
    "stablehlo.convolution": _Block._convolution,
    "stablehlo.transpose": _Block._transpose_rule,
    "stablehlo.reduce": _Block._reduce,
    "stablehlo.reshape": _Block._reshape_rule,
    "stablehlo.broadcast_in_dim": _Block._broadcast,
    "stablehlo.slice": _Block._slice,
    "stablehlo.pad": _Block._pad,
    "stablehlo.reverse": _Block._reverse,
    "stablehlo.concatenate": _Block._concatenate,
    "stablehlo.dot_general": _Block._dot_general,
}


def _feeds_convolution(v: ir.Value, depth: int = 4) -> bool:
    """``v`` is an operand of a convolution, directly or through reshapes, transposes and reverses."""
    for use in v.uses:
        owner = _op(use.owner)
        if owner.name == "stablehlo.convolution":
            return True
        if depth and owner.name in ("stablehlo.reshape", "stablehlo.transpose", "stablehlo.reverse") \
                and _feeds_convolution(owner.results[0], depth - 1):
            return True
    return False


_ALWAYS = frozenset({"stablehlo.convolution", "stablehlo.transpose"})
"""Ops rewritten even when no operand is carried in a layout yet."""


def _has_convolution(module_op: ir.Operation) -> bool:
    found = []

    def look(o):
        if o.name == "stablehlo.convolution":
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module_op.walk(look)
    return bool(found)


def run(module_op: ir.Operation, products: bool = False) -> None:
    if not _has_convolution(module_op):
        return
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        for region in op.regions:
            for block in region.blocks:
                _Block(block, products).run()


@register_pass(
    "lazy-channels-last",
    "StableHLO convolutions in XLA's CPU layout (N, spatial, C; kernel spatial, I, O), "
    "the layout carried through the ops between them so that only the program's edges transpose",
    options={"products": "true: 1x1 convolutions with one feature group become matrix products "
                         "(dot_general over channels; default false, see docs/guides/torch.md)"},
)
def _factory(products="false"):
    on = products if isinstance(products, bool) else products.strip().lower() in ("true", "1", "on")

    def run_pass(module_op):
        run(module_op, on)

    return run_pass
