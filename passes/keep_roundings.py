"""``lazy-keep-roundings``: a float product that a sum takes, and a quotient
that a divide takes, keep their own rounding, as eager's separate kernels round them.

XLA's CPU backend lets LLVM contract a floating multiply whose result an add
or subtract takes into one fused multiply-add (it sets LLVM's
``AllowFPOpFusion=Fast``; no XLA flag turns it off), which rounds once where
eager, running ``x * 0.3 + y`` as two kernels, rounds twice: float32
``x * 0.3 + y`` differed from eager in 18% of 100,003 values, SGD momentum's
``buf.mul(0.9).add(grad)`` in 28%, float64 in 15%. XLA and LLVM see through
``optimization_barrier``, ``reduce_precision``, ``+ 0.0`` and round trips
through a wider type.

This pass runs on StableHLO and fences every floating ``stablehlo.multiply``
whose result reaches an ``add``, ``subtract`` or ``negate``, directly or
through ops that only move or pick elements (only those uses take the fenced
value)::

    m      = multiply a, b
    fenced = bitcast_convert<f>(bitcast_convert<i>(m) xor broadcast(convert<i>(replica_id)))
    add fenced, c

The replica id is 0 (lazycore compiles one replica: SPMD programs over a
mesh are partitions of it, ``runtime.pjrt``), but neither XLA nor LLVM can
prove it, so the product is rounded before the sum; XLA computes it once a
program and the fused loop loads it once, so the fence costs one integer
``xor`` an element, and a NaN keeps its payload. (The fence this replaced,
an ``xor`` with ``convert(compare NE m, m)``, was three ops an element in
the loop: benchmark 6's heat program, n=1024, 1.88 ms of CPU with it, 1.54
with this one, 1.61 with no fence; it also flipped a NaN product's lowest
payload bit.) ``stablehlo.partition_id`` would not do: it is a device's
index in a mesh. A product that is exact (two operands converted from a
type with at most half the significand, as the lowerings' float32 fused
multiply-add emulation multiplies in float64) rounds nothing and is left.

A product a summing ``reduce`` takes is fenced too: XLA unrolls a short
reduction into adds and contracts them (float32 ``(x * x).sum(-1)`` over
rows of 2: 16% of 2,000 rows differed from NumPy's and eager's rounded
products, SciPy's ``integrate.cubature`` and ``differentiate`` saw it; 0
with the fence). A sum over dimensions of 4 or more elements each rounds
alike with and without the fence, so only a reduce with a summed dimension
shorter than :data:`_SHORT` has its product fenced (fencing them all cost
benchmark 7's GPT step 9% of its program's CPU time).

Where eager itself computes a fused multiply-add (``fmadd`` in torch's
``addcmul``, ``add``/``sub`` with ``alpha``, ``lerp``, torch.optim's
``param.add_(grad, alpha=-lr)``), the frontends build ``lazy.fma``, whose
lowering marks its product with ``lazy.fused``: that product is left to XLA
to contract into its sum, and the pass takes the mark off. LLVM contracts a
multiply into an add only where the product has that one use in the same
block, so the pass ties the product to its own sum (:func:`_tie`): ``a * b +
c`` multiplies ``a xor (c and 0)``, the zero the replica id again. Untied,
a fused product was left unfused where LLVM shared it with an equal product
(NumPy's ``x * conj(x)``: ``x * -y`` merged into ``-(x * y)`` of the plain
``y * x``, all 4,096 imaginary parts off) or where XLA computed it apart
from the sum (a product of row values hoisted before their broadcast:
float64 ``addcmul`` of 64 x 1 factors onto 64 x 33, 529 of 2,112 off;
``embedding_renorm`` float64 rows of 5-7, 28-38 of 600 rows); tied, 0. Two
integer ops an element, which a 1M-element fma program does not show (float32
and float64 alike, in the noise). (The float32 lowerings that emulate eager's
fused kernels as a float64 sum of an exact product keep eager's bits with or
without the fence.) A product a lowering marks ``lazy.either`` (float32
tanh's float64 polynomial, whose bounds hold rounded or fused) is neither
fenced nor tied, and loses the mark.

A product of values that are each one number broadcast (made from broadcast
scalars or splat constants by elementwise ops alone) is not fenced: XLA
computes such a chain once as a scalar and broadcasts it, and its algebraic
simplifier cycled on the fences there ("likely stuck in a circular
simplification loop" on stderr for ``x = x * 0.999 + 0.01`` a hundred times
from ``ones``), as jax.jit's own lowering of the fenced chain does.

A divide XLA's algebraic simplifier would rewrite around an operand
(:data:`_REWRITTEN_DIVISOR`: ``(a / b) / c`` to ``a / (b * c)``, ``a / sqrt(b)``
to ``a * rsqrt(b)``, ...) gets that operand fenced the same way, for that
divide only: eager divides what it is given, each quotient correctly
rounded. The backward of ``x / y`` is ``-g * ((x / y) / y)``: unfenced, 368
of 1,024 float32 gradients of a 64 x 16 ``y`` were off eager's.

A float scatter-add whose result an ``add`` takes is fenced for that add:
XLA's simplifier folds ``a + scatter(b, i, u)`` into ``scatter(a + b, i, u)``,
which adds ``a`` before the updates where eager adds the updates' sum. A tied
embedding's gradient is that sum (the head's product plus the lookup's
backward, a scatter into zeros): 15 of 6,144 float32 elements were off, the
rows two tokens hit (transformers' GPT-2 ``wte``, BERT's and T5's word
embeddings: the last gradients not eager's bits).

The pass is in every default pipeline, after the final ``canonicalize``
(which does not fold ``replica_id``): :data:`~.pipeline.DEFAULT_PIPELINE`.
"""

from __future__ import annotations

from lazycore.dialect.mlir import ir

from .catalog import register_pass
from .lowering.elementwise import EITHER, FUSED

_WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
_SIGNIFICAND = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}

_CONTRACTING = frozenset({"stablehlo.add", "stablehlo.subtract", "stablehlo.negate"})
"""Users that LLVM may fuse a product into."""

_MOVING = frozenset("stablehlo." + n for n in """
    broadcast_in_dim reshape transpose slice dynamic_slice concatenate pad reverse select
    dynamic_update_slice gather copy
""".split())
"""Users that only move or pick elements: XLA fuses them into the loop that computes their user."""

_DEPTH = 64
"""How many moving ops deep a sum is looked for: a lowering's lanes are
slices of reshapes of slices (``lazy.vector_sum``'s first add takes its
product seven deep; 4 left T5's RMS norm's ``x.pow(2).mean(-1)`` contracted,
10% of its means off eager's)."""


def _float_name(t: ir.Type) -> str | None:
    try:
        elt = ir.ShapedType(t).element_type
    except ValueError:
        return None
    name = str(elt)
    return name if name in _WIDTH else None


def _ranked(t: ir.Type) -> bool:
    try:
        ir.RankedTensorType(t)
    except ValueError:
        return False
    return True


def _op(owner):
    return owner.operation if hasattr(owner, "operation") else owner


def _contracting(use, memo: dict, depth: int = _DEPTH) -> bool:
    """The user of ``use`` is a sum LLVM could fuse a product into, or
    moves the value to one."""
    user = _op(use.owner)
    if user.name in _CONTRACTING or (user.name == "stablehlo.reduce" and _short(user) and _sums(user)):
        return True
    return bool(depth) and user.name in _MOVING and any(_contracted(r, memo, depth - 1) for r in user.results)


_SHORT = 8
"""A summing reduce is fenced when one of its reduced dimensions is shorter
than this: XLA unrolls a dimension of 2 (or 3 nested in another reduced
dimension) into adds LLVM contracts a product into; over every dimension of
4 or more the fence changes no bit (float32 (x * y).sum over a last, a
first, and a middle-and-first pair of dimensions of 4, 5, 8, 9, ..., 512:
0 of 2,000 sums differ), and it costs integer work per element in the
loop: benchmark 7's GPT step fenced 4.9M elements for its 128- to
65,536-element sums."""


def _short(reduce: ir.Operation) -> bool:
    """One of the summed dimensions is shorter than :data:`_SHORT`."""
    shape = ir.RankedTensorType(reduce.operands[0].type).shape if _ranked(reduce.operands[0].type) else None
    if shape is None:
        return True
    dims = [int(d) for d in ir.DenseI64ArrayAttr(reduce.attributes["dimensions"])]
    return any(shape[d] < _SHORT for d in dims)


def _sums(reduce: ir.Operation) -> bool:
    """A ``stablehlo.reduce`` whose body adds (a sum XLA may unroll into adds)."""
    return any(_op(o).name == "stablehlo.add" for region in reduce.regions for block in region for o in block)


def _contracted(v: ir.Value, memo: dict, depth: int = _DEPTH) -> bool:
    """``v`` reaches a sum LLVM could fuse a product into (``memo``: the
    values asked before, so a lowering's slices of slices are walked once)."""
    known = memo.get(v)
    if known is None:
        known = memo[v] = any(_contracting(use, memo, depth) for use in v.uses)
    return known


def _exact(op: ir.Operation, dtype: str) -> bool:
    """The product of ``op``'s operands rounds nothing: both are converted
    from floats with at most half ``dtype``'s significand and whose products
    stay in ``dtype``'s normal range (not bfloat16's in float32: its range is
    float32's, so its products can overflow or become subnormal)."""
    for operand in op.operands:
        owner = operand.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)) or _op(owner).name != "stablehlo.convert":
            return False
        source = _float_name(_op(owner).operands[0].type)
        if source is None or 2 * _SIGNIFICAND[source] > _SIGNIFICAND[dtype] or (source, dtype) == ("bf16", "f32"):
            return False
    return True


_ELEMENTWISE = frozenset("stablehlo." + n for n in """
    add subtract multiply divide negate abs maximum minimum exponential log tanh sqrt rsqrt power remainder
    convert bitcast_convert compare select xor and or not sign floor ceil round_nearest_even
""".split())
"""Ops whose result is uniform (one value everywhere) where their operands are."""


def _uniform(v: ir.Value, memo: dict, depth: int = 64) -> bool:
    """``v`` holds one value in every element, made from a broadcast scalar
    (or a splat constant) by elementwise ops only."""
    key = v
    known = memo.get(key)
    if known is not None:
        return known
    owner = v.owner
    result = False
    if isinstance(owner, (ir.Operation, ir.OpView)) and depth:
        op = _op(owner)
        if op.name == "stablehlo.broadcast_in_dim":
            result = not ir.RankedTensorType(op.operands[0].type).rank
        elif op.name == "stablehlo.constant":
            value = op.attributes["value"]
            result = isinstance(value, ir.DenseElementsAttr) and value.is_splat
        elif op.name in _ELEMENTWISE:
            result = all(_uniform(o, memo, depth - 1) for o in op.operands)
    memo[key] = result
    return result


def _zero_bits(like: ir.Value, width: ir.Type) -> ir.Value:
    """Integers of ``like``'s shape that are 0 (the replica id) where no compiler can prove it."""
    shaped = ir.RankedTensorType(like.type)
    replica = ir.Operation.create(
        "stablehlo.replica_id", results=[ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32))])
    zero = ir.Operation.create("stablehlo.convert", results=[ir.RankedTensorType.get([], width)],
                               operands=[replica.result])
    return ir.Operation.create(
        "stablehlo.broadcast_in_dim", results=[ir.RankedTensorType.get(shaped.shape, width, shaped.encoding)],
        operands=[zero.result], attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])},
    ).result


def _fence(op: ir.Operation, dtype: str, takes) -> None:
    """Fence ``op``'s result for the uses ``takes`` picks."""
    m = op.results[0]
    with ir.InsertionPoint(op), op.location:
        width = ir.IntegerType.get_signless(_WIDTH[dtype])
        zeros = _zero_bits(m, width)
        bits = ir.Operation.create("stablehlo.bitcast_convert", results=[zeros.type], operands=[m])
        kept = ir.Operation.create("stablehlo.xor", results=[zeros.type], operands=[bits.result, zeros])
        fenced = ir.Operation.create("stablehlo.bitcast_convert", results=[m.type], operands=[kept.result])
    op.move_before(bits)
    # (only the sums take the fenced value: what else reads the product reads its own bits)
    for use in [u for u in m.uses if takes(u)]:
        _op(use.owner).operands[use.operand_number] = fenced.result


def _tie(op: ir.Operation, uniform: dict) -> None:
    """Make a fused product ``op`` (``a * b``, which one add or subtract takes with
    an addend ``c``) multiply ``a xor (c and 0)``: no other product has that operand,
    so LLVM cannot share it (nor merge ``a * -b`` into ``-(a * b)`` of another
    product), and XLA cannot compute it apart from its sum (a product of
    broadcasts hoisted before the broadcast), so LLVM contracts it."""
    m = op.results[0]
    dtype = _float_name(m.type)
    users = list(m.uses)
    if dtype is None or not _ranked(m.type) or len(users) != 1:
        return
    user = _op(users[0].owner)
    if user.name not in ("stablehlo.add", "stablehlo.subtract"):
        return
    addend = user.operands[1 - users[0].operand_number]
    a = op.operands[0]
    if _uniform(addend, uniform) and all(_uniform(v, uniform) for v in op.operands):
        return  # (XLA computes it once as a scalar; its simplifier cycles on fences there)
    op.move_before(user)  # (after the addend, which may come later)
    with ir.InsertionPoint(op), op.location:
        zeros = _zero_bits(m, ir.IntegerType.get_signless(_WIDTH[dtype]))
        ints = zeros.type
        c_bits = ir.Operation.create("stablehlo.bitcast_convert", results=[ints], operands=[addend])
        zero = ir.Operation.create("stablehlo.and", results=[ints], operands=[c_bits.result, zeros])
        a_bits = ir.Operation.create("stablehlo.bitcast_convert", results=[ints], operands=[a])
        kept = ir.Operation.create("stablehlo.xor", results=[ints], operands=[a_bits.result, zero.result])
        tied = ir.Operation.create("stablehlo.bitcast_convert", results=[a.type], operands=[kept.result])
    op.operands[0] = tied.result


_REWRITTEN_DIVISOR = frozenset("stablehlo." + n for n in "divide exponential sqrt rsqrt power".split())
"""A divide's divisor made by these XLA's algebraic simplifier rewrites the
divide around (``HandleDivide``): ``A / (B / C)`` to ``(A * C) / B``,
``A / exp(B)`` to ``A * exp(-B)``, ``A / sqrt(B)`` to ``A * rsqrt(B)``,
``A / rsqrt(B)`` to ``A * sqrt(B)``, ``A / pow(B, C)`` to ``A * pow(B, -C)``;
and a dividend that is a divide, ``(A / B) / C`` to ``A / (B * C)``."""


def _rewritten_quotients(divide: ir.Operation) -> list:
    """``(producer, operand_number)`` of ``divide``'s operands XLA would rewrite it around."""
    out = []
    for i, names in ((0, ("stablehlo.divide",)), (1, _REWRITTEN_DIVISOR)):
        owner = divide.operands[i].owner
        if isinstance(owner, (ir.Operation, ir.OpView)) and _op(owner).name in names:
            out.append((_op(owner), i))
    return out


def _divided(use) -> bool:
    """The user of ``use`` is a divide XLA would rewrite around this operand."""
    user = _op(use.owner)
    if user.name != "stablehlo.divide":
        return False
    return use.operand_number == 1 or _op(user.operands[0].owner).name == "stablehlo.divide"


def run(module_op: ir.Operation) -> None:
    found, fused, either, uniform, quotients, sums, scattered = [], [], [], {}, {}, {}, []

    def look(o):
        o = o.operation
        if o.name == "stablehlo.divide" and len(o.results) == 1:
            # eager divides what it is given, each result correctly rounded: the
            # operands XLA would rewrite the divide around are fenced, as products are
            # (the backward of x / y, -g * ((x / y) / y): XLA's x / (y * y) rounded
            # 368 of 1,024 float32 gradients otherwise)
            for producer, _ in _rewritten_quotients(o):
                dtype = _float_name(producer.results[0].type)
                if (dtype is not None and len(producer.results) == 1 and _ranked(producer.results[0].type)
                        and not _uniform(producer.results[0], uniform)):
                    quotients.setdefault(producer, dtype)
        if o.name == "stablehlo.scatter" and len(o.results) == 1:
            # XLA's simplifier folds ``a + scatter(b, i, u)`` into ``scatter(a + b, i, u)``,
            # which adds ``a`` before the updates where eager adds their sum: a tied
            # embedding's gradient (the head's product plus the embedding's scatter
            # into zeros) differed in every row two tokens hit
            dtype = _float_name(o.results[0].type)
            if dtype is not None and _ranked(o.results[0].type) and _sums(o) and any(
                    _op(u.owner).name == "stablehlo.add" for u in o.results[0].uses):
                scattered.append((o, dtype))
        if o.name == "stablehlo.multiply" and len(o.results) == 1:
            dtype = _float_name(o.results[0].type)
            if FUSED in o.attributes:
                fused.append(o)  # a lazy.fma's product: eager fuses it too
            elif EITHER in o.attributes:
                either.append(o)  # rounded or not, alike
            elif (dtype is not None and _ranked(o.results[0].type) and not _exact(o, dtype)
                  and _contracted(o.results[0], sums) and not _uniform(o.results[0], uniform)):
                found.append((o, dtype))
        return ir.WalkResult.ADVANCE

    module_op.walk(look)
    for o, dtype in found:
        _fence(o, dtype, lambda use: _contracting(use, sums))
    for o, dtype in quotients.items():
        _fence(o, dtype, _divided)
    for o, dtype in scattered:
        _fence(o, dtype, lambda use: _op(use.owner).name == "stablehlo.add")
    for o in fused:
        del o.attributes[FUSED]
        _tie(o, uniform)
    for o in either:
        del o.attributes[EITHER]


@register_pass(
    "lazy-keep-roundings",
    "StableHLO float products that a sum takes are fenced (an integer xor with the replica id, 0, "
    "that XLA and LLVM cannot fold), "
    "so that XLA's CPU backend does not contract them into fused multiply-adds eager does not compute "
    "(a lazy.fma's product, marked lazy.fused, is left to it, its first operand tied to its addend so that "
    "LLVM neither shares it nor sees it apart from its sum); likewise a divide's operands XLA's "
    "algebraic simplifier would rewrite it around ((a / b) / c to a / (b * c), a / sqrt(b) to a * rsqrt(b)), "
    "and a scatter-add an add takes (folded into the scatter otherwise)",
)
def _factory():
    return run
