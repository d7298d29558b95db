"""The op table of the ``lazy`` dialect.

Each op is declared once, as an :class:`OpSpec`: its operands, attributes,
results, traits and its shape/dtype rule. Everything else is derived from that
row: the MLIR op class and its verifier (:mod:`lazycore.dialect.build`), shape
inference on the runtime's per-op path (:func:`infer`), and the documentation
``lazy-opt --list-ops`` and ``--dialect-doc`` print. This module is free of MLIR on purpose.

The traits are what rewrites need to know about an op, so that none of them
keeps a list of op names: whether it is elementwise (and of which element-type
class), how constant folding evaluates it (``fold``), the identity a reduction
starts from, and how shape-bucket padding treats it (``padding``, with an
explicit ``"refused"`` for ops it cannot pad). Constant folding
(:mod:`lazycore.passes.folding`), padding (:mod:`lazycore.runtime.padding`),
the dialect reference's examples and the frontends read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from .rules import DTYPE_CLASSES
from .types import ShapeError, TensorType

# How attribute values look on the Python side (the MLIR side is in build.py):
#   "i64"   -> int                  IntegerAttr i64
#   "i64[]" -> tuple[int, ...]      DenseI64ArrayAttr
#   "f64"   -> float                FloatAttr f64
#   "bool"  -> bool                 BoolAttr
#   "str"   -> str                  StringAttr
#   "dense" -> numpy.ndarray        DenseElementsAttr (its type is the tensor type)
ATTR_KINDS = ("i64", "i64[]", "f64", "bool", "str", "dense")

# How shape-bucket padding (lazycore.runtime.padding) treats an op when one
# of its operands is padded:
#   "elementwise": positions combine only with equal positions, so the padded
#                  op computes the same valid positions (the operands' padded
#                  dimensions are the result's);
#   "reduction":   the reduced dimensions' padded positions are masked with
#                  the op's ``identity`` first (dims in attribute ``dims``, or
#                  the one ``dim``), the kept ones stay padded;
#   "own":         padding has a rule of its own for the op (shape ops,
#                  contractions, lookups), keyed by its name there;
#   "refused":     the op mixes positions in a way no rule undoes (random
#                  bits, sorting, transforms, collectives): a graph where it
#                  meets a padded value is compiled at its own sizes.
PADDING_KINDS = ("elementwise", "reduction", "own", "refused")

# The value a reduction's masked positions take so that they cannot change
# its result: "zero" (sum), "one" (product), "low" (the type's lowest value:
# max, argmax) or "high" (min, argmin).
IDENTITIES = ("zero", "one", "low", "high")

# Values a result type carries that the rule needs as input (reshape's target
# shape, convert's target dtype): the builder passes them in, the verifier reads
# them off the result type named by ``OpSpec.params_from``.
RESULT_PARAMS = ("shape", "dtype")


@dataclass(frozen=True)
class OpSpec:
    name: str
    """Op name without the dialect prefix, e.g. ``"add"``."""
    operands: tuple[str, ...]
    """Operand names; a name ending in ``*`` is a variadic group (at most one)."""
    rule: Callable[..., TensorType | tuple[TensorType, ...]]
    """``rule(*operand_types, **attrs, **result_params)`` -> result type(s).

    Raises :class:`ShapeError` with a message stating the broken rule."""
    attrs: dict[str, str] = field(default_factory=dict)
    results: tuple[str, ...] = ("result",)
    result_params: tuple[str, ...] = ()
    params_from: str | None = None
    """Which result carries ``result_params`` (default: the first)."""
    pure: bool = True
    commutative: bool = False
    summary: str = ""
    elementwise: bool = False
    """Each result position is computed from the operands' values at that
    position alone; operands and results share one shape (no broadcasting)."""
    dtypes: str | None = None
    """For an elementwise op whose operands all have one element-type class
    (``dialect.rules.DTYPE_CLASSES``): that class."""
    fold: Callable | None = None
    """How constant folding evaluates the op (:mod:`lazycore.dialect.folds`):
    ``fold(*operand_arrays, **attrs, **result_params)`` -> array, or None for
    values left to the backend. None: the op is not folded."""
    identity: str | None = None
    """A reduction's identity (one of :data:`IDENTITIES`); None: not a reduction."""
    padding: str | None = None
    """How shape-bucket padding treats the op (one of :data:`PADDING_KINDS`);
    elementwise ops default to ``"elementwise"``, reductions to
    ``"reduction"``. None: undecided, which padding takes as refused (the
    dialect's own rows all decide: tests/test_op_table.py)."""

    def __post_init__(self):
        if self.padding is None:
            default = "elementwise" if self.elementwise else "reduction" if self.identity else None
            object.__setattr__(self, "padding", default)

    @property
    def doc(self) -> str:
        """One line saying what the op does (``lazy-opt --list-ops``): the
        summary, else the first paragraph of the rule's docstring."""
        text = self.summary or (self.rule.__doc__ or "")
        paragraph = text.strip().split("\n\n")[0]
        return " ".join(line.strip() for line in paragraph.splitlines())

    @property
    def full_name(self) -> str:
        return f"lazy.{self.name}"

    @cached_property  # the verifier asks for every op it checks
    def variadic(self) -> str | None:
        for o in self.operands:
            if o.endswith("*"):
                return o[:-1]
        return None

    @property
    def operand_names(self) -> tuple[str, ...]:
        return tuple(o.rstrip("*") for o in self.operands)

    def infer(self, *operands: TensorType, **kwargs) -> tuple[TensorType, ...]:
        """Run the rule; always returns a tuple of result types."""
        out = self.rule(*operands, **kwargs)
        return out if isinstance(out, tuple) and not isinstance(out, TensorType) else (out,)


OPS: dict[str, OpSpec] = {}


def define(spec: OpSpec) -> OpSpec:
    """Add a row to the op table. Defining a name twice is an error."""
    if spec.full_name in OPS:
        raise ValueError(f"op '{spec.full_name}' is already defined")
    for kind in spec.attrs.values():
        if kind not in ATTR_KINDS:
            raise ValueError(f"op '{spec.full_name}': unknown attribute kind '{kind}'")
    for p in spec.result_params:
        if p not in RESULT_PARAMS:
            raise ValueError(f"op '{spec.full_name}': unknown result parameter '{p}'")
    if spec.padding is not None and spec.padding not in PADDING_KINDS:
        raise ValueError(f"op '{spec.full_name}': unknown padding kind '{spec.padding}'")
    if spec.dtypes is not None and spec.dtypes not in DTYPE_CLASSES:
        raise ValueError(f"op '{spec.full_name}': unknown element-type class '{spec.dtypes}'")
    if spec.identity is not None and spec.identity not in IDENTITIES:
        raise ValueError(f"op '{spec.full_name}': unknown reduction identity '{spec.identity}'")
    if (spec.padding == "reduction") != (spec.identity is not None):
        raise ValueError(f"op '{spec.full_name}': padding 'reduction' and an identity go together")
    if (spec.padding == "elementwise" or spec.fold is not None or spec.dtypes is not None) and not spec.elementwise:
        raise ValueError(f"op '{spec.full_name}': elementwise padding, a fold and dtypes are traits of elementwise ops")
    if sum(o.endswith("*") for o in spec.operands) > 1:
        raise ValueError(f"op '{spec.full_name}': at most one variadic operand group")
    if any(r.endswith("*") for r in spec.results) and len(spec.results) != 1:
        raise ValueError(f"op '{spec.full_name}': a variadic result group must be the only result")
    OPS[spec.full_name] = spec
    return spec


def op(name: str, operands: tuple[str, ...] = (), **kw):
    """Decorator form of :func:`define`: the decorated function is the rule."""

    def wrap(rule):
        define(OpSpec(name=name, operands=tuple(operands), rule=rule, **kw))
        return rule

    return wrap


def spec_of(name: str) -> OpSpec:
    """Look up an op by ``lazy.add`` or ``add``; an unknown op names itself."""
    full = name if name.startswith("lazy.") else f"lazy.{name}"
    try:
        return OPS[full]
    except KeyError:
        raise KeyError(f"unknown lazy op '{full}'") from None


def infer(name: str, *operands: TensorType, **kwargs) -> tuple[TensorType, ...]:
    """Result types of ``lazy.<name>`` applied to ``operands`` with ``kwargs``."""
    return spec_of(name).infer(*operands, **kwargs)


__all__ = ["ATTR_KINDS", "IDENTITIES", "OPS", "PADDING_KINDS", "OpSpec", "ShapeError", "TensorType", "define", "infer", "op", "spec_of"]
