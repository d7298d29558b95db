"""The lowering registry: the MLIR rewrite patterns for each ``lazy`` op.

A lowering is a function ``fn(op, rewriter) -> values`` that builds StableHLO
at the rewriter's insertion point (just before ``op``) and returns the values
that replace the op's results, or declines the op (returns ``None`` or raises
:class:`Decline`) to leave it to the next lowering. The ``lazy-to-stablehlo``
pass wraps each op's lowerings into one rewrite pattern rooted at it and runs
them all as one dialect conversion.

Built-in lowerings register with :func:`lowering` (one per op; registering an
op twice is an error). Users add lowerings with :func:`register_lowering`:
each op's user lowerings are tried newest first, then the built-in one, until
one does not decline. :func:`~lazycore.passes.lowering.builtin.builtin_lowering` gives the built-in one, to call
from a user lowering. PDL patterns loaded from a ``.mlir`` file with
:func:`load_pdl_patterns` run before all of them, so they win for the ops
they match.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from lazycore.dialect.mlir import ir

LoweringFn = Callable[..., "ir.Value | Sequence[ir.Value] | None"]


@dataclass(frozen=True, eq=False)
class Lowering:
    """One registered lowering: the function and where it was registered (its
    errors name that line)."""

    fn: LoweringFn
    op: str
    """The full op name (``"lazy.tanh"``)."""
    site: tuple[str, int]
    """``(file, line)`` of the registration."""
    builtin: bool = False

    @property
    def where(self) -> str:
        return f"{self.site[0]}:{self.site[1]}"

    def describe(self) -> str:
        return f"the built-in lowering ({self.where})" if self.builtin else f"the lowering registered at {self.where}"


class Decline(Exception):
    """Raised by a lowering to leave its op to the next lowering, as returning
    ``None`` does; the message says why (it is shown when no lowering of the
    op accepts it). Raise it before building any op or after: ops a declining
    lowering built are dropped."""


BUILTIN: dict[str, Lowering] = {}
USER: dict[str, tuple[Lowering, ...]] = {}
"""Op name -> its user lowerings, in registration order (tried last first)."""
PDL_SOURCES: list[str] = []


def full_name(name: str) -> str:
    return name if name.startswith("lazy.") else f"lazy.{name}"


def _site(depth: int) -> tuple[str, int]:
    frame = sys._getframe(depth + 1)
    return frame.f_code.co_filename, frame.f_lineno


def lowering(*names: str):
    """Decorator for built-in lowerings: ``@lowering("add", "sub")``."""
    site = _site(1)

    def wrap(fn):
        for n in names:
            full = full_name(n)
            if full in BUILTIN:
                raise ValueError(f"a built-in lowering for '{full}' is already registered")
            BUILTIN[full] = Lowering(fn, full, site, builtin=True)
        return fn

    return wrap


def register_lowering(name: str, fn: LoweringFn | None = None):
    """Lower ``lazy.<name>`` with ``fn``, tried before the op's earlier lowerings.

    ``fn(op, rewriter)`` builds ops with ``ir.Operation.create`` (the
    insertion point and location are already set to the op's) and returns the
    replacement value(s), of the op's result types; or it declines (returns
    ``None`` or raises :class:`Decline`), and the lowering registered before
    it, else the built-in one, gets the op. Takes effect for every pipeline
    run afterwards. Without ``fn``, a decorator: ``@register_lowering("tanh")``.
    Registering a function already registered for the op moves it first.
    """
    from lazycore.dialect import OPS

    full = full_name(name)
    if full not in OPS:
        raise KeyError(f"unknown lazy op '{full}'")
    site = _site(1)

    def add(fn):
        if not callable(fn):
            raise TypeError(f"a lowering is a function (op, rewriter), got {type(fn).__name__}")
        others = tuple(r for r in USER.get(full, ()) if r.fn is not fn)
        USER[full] = others + (Lowering(fn, full, site),)
        return fn

    return add if fn is None else add(fn)


def unregister_lowering(name: str, fn: LoweringFn | None = None) -> None:
    """Drop the user lowering ``fn`` of ``lazy.<name>``, or all of them (the
    built-in one lowers the op again)."""
    full = full_name(name)
    kept = () if fn is None else tuple(r for r in USER.get(full, ()) if r.fn is not fn)
    if kept:
        USER[full] = kept
    else:
        USER.pop(full, None)


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
    from lazycore.dialect.build import new_context

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
    """A Path, or one line that cannot be a module of patterns (no braces): a file name,
    whatever its suffix (``neg.pdl`` as much as ``neg.mlir``)."""
    if isinstance(source, Path):
        return True
    return "\n" not in source and "{" not in source


def lowerings_for(name: str) -> tuple[Lowering, ...]:
    """The lowerings of ``lazy.<name>`` in the order they are tried."""
    full = full_name(name)
    user = USER.get(full, ())
    builtin = BUILTIN.get(full)
    return tuple(reversed(user)) + ((builtin,) if builtin is not None else ())


def lowering_for(name: str) -> LoweringFn | None:
    """The function tried first for ``lazy.<name>``, or None."""
    found = lowerings_for(name)
    return found[0].fn if found else None
