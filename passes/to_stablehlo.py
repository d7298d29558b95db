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


def _apply_pdl_patterns(module_op: ir.Operation) -> None:
    """Run the loaded PDL patterns greedily over ``module_op``."""
    if not registry.PDL_SOURCES:
        return
    # Sources parse one by one (a file may or may not wrap its patterns in
    # `module {}`), then meet in one module so their benefits compete.
    # Every Python module object is held until freeze() has compiled the
    # patterns: the bindings erase a module's op when its object dies, even
    # while its ops are being moved or PDLModule is reading it.
    with ir.Location.unknown():
        merged = ir.Module.create()
    sources = [ir.Module.parse(text) for text in registry.PDL_SOURCES]
    for source in sources:
        for pattern in list(source.body.operations):
            merged.body.append(pattern)
    frozen = rewrite.PDLModule(merged).freeze()
    rewrite.apply_patterns_and_fold_greedily(module_op, frozen)


def run(module_op: ir.Operation, pass_=None) -> None:
    load_builtin_lowerings()
    # PDL patterns go first and win; they may also leave new lazy ops behind,
    # so the ops to lower are collected after them.
    _apply_pdl_patterns(module_op)
    names = set()

    def collect(o):
        if o.name.startswith("lazy."):
            names.add(o.name)
        return ir.WalkResult.ADVANCE

    module_op.walk(collect)
    missing = sorted(n for n in names if registry.lowering_for(n) is None)
    if missing:
        raise LoweringError("lazy-to-stablehlo: no lowering registered for " + ", ".join(f"'{n}'" for n in missing))

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
