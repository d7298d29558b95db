"""``lazy-to-stablehlo``: a dialect conversion from ``lazy`` to StableHLO.

One rewrite pattern per op, taken from the lowering registry (user overrides
first). The ``lazy`` dialect is illegal: after the pass no ``lazy`` op is
left, and an op with no lowering fails the pass with its name.
"""

from __future__ import annotations

from lazycore.mlir import ir, rewrite

from .lowering import registry
from .lowering import load_builtin_lowerings


class LoweringError(RuntimeError):
    """The conversion to StableHLO could not lower some op."""


def _as_pattern(fn):
    def pattern(op, rewriter):
        with rewriter.ip, op.location:
            out = fn(op, rewriter)
        if out is None:
            return True  # declined: the conversion reports the op as illegal
        if isinstance(out, ir.Value):
            out = [out]
        rewriter.replace_op(op, list(out))
        return False

    return pattern


def _pdl_patterns():
    if not registry.PDL_SOURCES:
        return None
    text = "\n".join(
        # each source is a module; take their bodies into one module
        s.strip().removeprefix("module {").removesuffix("}") if s.strip().startswith("module {") else s
        for s in registry.PDL_SOURCES
    )
    return rewrite.PDLModule(ir.Module.parse(text)).freeze()


def run(module_op: ir.Operation, pass_=None) -> None:
    load_builtin_lowerings()
    names = set()

    def collect(o):
        if o.name.startswith("lazy."):
            names.add(o.name)
        return ir.WalkResult.ADVANCE

    module_op.walk(collect)
    missing = sorted(n for n in names if registry.lowering_for(n) is None)

    pdl = _pdl_patterns()
    if pdl is not None:
        rewrite.apply_patterns_and_fold_greedily(module_op, pdl)

    if missing:
        # Ops a PDL pattern already lowered are fine; the rest name themselves.
        left = set()
        module_op.walk(lambda o: (left.add(o.name) if o.name in missing else None) or ir.WalkResult.ADVANCE)
        if left:
            raise LoweringError(
                "lazy-to-stablehlo: no lowering registered for " + ", ".join(f"'{n}'" for n in sorted(left))
            )

    patterns = rewrite.RewritePatternSet()
    for n in sorted(names):
        fn = registry.lowering_for(n)
        if fn is not None:
            patterns.add(n, _as_pattern(fn))
    target = rewrite.ConversionTarget()
    target.add_legal_dialect("stablehlo")
    target.add_legal_dialect("func")
    target.add_legal_dialect("builtin")
    target.add_illegal_dialect("lazy")
    try:
        rewrite.apply_full_conversion(module_op, target, patterns.freeze())
    except ir.MLIRError as e:
        raise LoweringError(f"lazy-to-stablehlo failed: {e}") from None


from .pipeline import register_pass  # noqa: E402


@register_pass(
    "lazy-to-stablehlo",
    "Convert every lazy op to StableHLO with the registered lowering patterns",
)
def _factory():
    return run
