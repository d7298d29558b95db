"""The lowering registry: one MLIR rewrite pattern per ``lazy`` op.

A lowering is a function ``fn(op, rewriter) -> values`` that builds StableHLO
at the rewriter's insertion point (just before ``op``) and returns the values
that replace the op's results. The ``lazy-to-stablehlo`` pass wraps each one
into a rewrite pattern rooted at its op and runs them all as one dialect
conversion.

Built-in lowerings register with :func:`lowering` (registering an op twice is
an error). Users override or add lowerings with :func:`register_lowering`,
and may load PDL patterns from a ``.mlir`` file with :func:`load_pdl_patterns`;
PDL patterns run first, so they win over Python ones for the ops they match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from lazycore.mlir import ir

LoweringFn = Callable[..., "ir.Value | Sequence[ir.Value]"]

BUILTIN: dict[str, LoweringFn] = {}
USER: dict[str, LoweringFn] = {}
PDL_SOURCES: list[str] = []


def _full(name: str) -> str:
    return name if name.startswith("lazy.") else f"lazy.{name}"


def lowering(*names: str):
    """Decorator for built-in lowerings: ``@lowering("add", "sub")``."""

    def wrap(fn):
        for n in names:
            full = _full(n)
            if full in BUILTIN:
                raise ValueError(f"a built-in lowering for '{full}' is already registered")
            BUILTIN[full] = fn
        return fn

    return wrap


def register_lowering(name: str, fn: LoweringFn) -> None:
    """Use ``fn`` to lower ``lazy.<name>``, replacing the built-in lowering.

    ``fn(op, rewriter)`` builds ops with ``ir.Operation.create`` (the
    insertion point and location are already set to the op's) and returns the
    replacement value(s). Takes effect for every pipeline run afterwards.
    """
    from lazycore.dialect import OPS

    full = _full(name)
    if full not in OPS:
        raise KeyError(f"unknown lazy op '{full}'")
    USER[full] = fn


def unregister_lowering(name: str) -> None:
    """Drop a user lowering, restoring the built-in one."""
    USER.pop(_full(name), None)


def load_pdl_patterns(source: str | Path) -> None:
    """Add the PDL patterns of a ``.mlir`` file (or of MLIR text).

    The text is a module of ``pdl.pattern`` ops (the ``module {}`` around them
    may be left out). They are applied greedily before the built-in
    conversion, so a PDL pattern that rewrites a ``lazy`` op into StableHLO
    takes precedence over its Python lowering; one that rewrites it into other
    ``lazy`` ops leaves those to their lowerings. A pattern that matches its
    own output fails the pass once the rewrites exceed a bound set by the
    module's size (:mod:`lazycore.passes.pdl`).
    """
    text = Path(source).read_text() if _looks_like_path(source) else str(source)
    from lazycore.mlir import new_context

    # Fail here, at the user's call, rather than in some later compile.
    with new_context():
        module = ir.Module.parse(text)
        names = [o.operation.name for o in module.body.operations]
        others = sorted(set(names) - {"pdl.pattern"})
        if not names or others:
            found = ", ".join(others) if others else "nothing"
            raise ValueError(f"load_pdl_patterns: expected pdl.pattern ops, found {found}")
        module.operation.verify()
    PDL_SOURCES.append(text)


def clear_user_patterns() -> None:
    USER.clear()
    PDL_SOURCES.clear()


def _looks_like_path(source) -> bool:
    if isinstance(source, Path):
        return True
    return "\n" not in source and source.endswith(".mlir")


def lowering_for(name: str) -> LoweringFn | None:
    full = _full(name)
    return USER.get(full) or BUILTIN.get(full)
