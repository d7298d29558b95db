"""Applying the loaded PDL patterns (:func:`lazycore.passes.load_pdl_patterns`).

``lazy-to-stablehlo`` applies them before its Python lowerings; the
``lazy-apply-pdl`` pass applies them alone, to see what they do. MLIR's
greedy driver keeps rewriting while any pattern matches, and bounds only its
outer iterations by default: a pattern that matches its own output loops
within one of them forever. Here the rewrites are bounded by the module's
size, and running out names the patterns that still match.
"""

from __future__ import annotations

from lazycore.dialect.mlir import ir, rewrite

from .lowering import registry
from .catalog import PassError, register_pass

REWRITES_PER_OP = 32
"""Rewrites one greedy iteration may make per op of the module: far above
what lowering-style patterns need (a few per op), far below forever."""
MIN_REWRITES = 1000


def _count_ops(module_op: ir.Operation) -> int:
    n = 0

    def count(_op):
        nonlocal n
        n += 1
        return ir.WalkResult.ADVANCE

    module_op.walk(count)
    return n


def _roots(pattern_module: ir.Module) -> dict[str, str]:
    """Pattern name -> the op name its root matches (patterns with a named root only)."""
    roots = {}
    for pattern in pattern_module.body.operations:
        name = ir.StringAttr(pattern.attributes["sym_name"]).value if "sym_name" in pattern.attributes else "<unnamed>"
        for op in pattern.regions[0].blocks[0].operations:
            if op.operation.name != "pdl.rewrite" or not len(op.operands):
                continue
            root = op.operands[0].owner
            if "opName" in root.attributes:
                roots[name] = ir.StringAttr(root.attributes["opName"]).value
    return roots


def _not_converged(module_op: ir.Operation, config, roots: dict[str, str]) -> PassError:
    """Which patterns still match something, and where the first such op is."""
    present: dict[str, ir.Location] = {}

    def find(op):
        present.setdefault(op.name, op.location)
        return ir.WalkResult.ADVANCE

    module_op.walk(find)
    suspects = [(p, r) for p, r in roots.items() if r in present]
    message = (
        f"the PDL patterns did not converge ({config.max_iterations} iterations "
        f"of at most {config.max_num_rewrites} rewrites)"
    )
    if not suspects:
        return PassError(message, module_op.location)
    named = ", ".join(f"@{p} (rooted at {r})" for p, r in suspects)
    return PassError(
        f"{message}; still matching: {named}. A pattern that matches its own output rewrites forever",
        present[suspects[0][1]],
    )


def apply_pdl_patterns(module_op: ir.Operation) -> None:
    """Run the loaded PDL patterns greedily over ``module_op``; PassError if
    they do not converge within the rewrite bound."""
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
    roots = _roots(merged)  # before PDLModule takes the patterns over
    frozen = rewrite.PDLModule(merged).freeze()
    config = rewrite.GreedyRewriteConfig()
    config.max_num_rewrites = max(MIN_REWRITES, REWRITES_PER_OP * _count_ops(module_op))
    try:
        rewrite.apply_patterns_and_fold_greedily(module_op, frozen, config)
    except RuntimeError as e:
        if "converge" not in str(e):
            raise
        raise _not_converged(module_op, config, roots) from None


@register_pass(
    "lazy-apply-pdl",
    "Apply the loaded PDL patterns (lazy-opt --load-pdl-patterns) greedily, with a rewrite bound",
)
def _factory():
    return apply_pdl_patterns
