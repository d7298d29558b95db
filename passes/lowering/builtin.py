"""The built-in lowerings: one module per op family, each registering its
lowerings with the registry when imported (``@lowering``).

They load at the first lowering (``lazy-to-stablehlo``) or the first look-up
of one, not with the package: a user registering a lowering, and a program
loaded from disk, need none of them.
"""

from __future__ import annotations

from .registry import BUILTIN, LoweringFn, full_name

_loaded = False


def load_builtin_lowerings() -> None:
    """Import the op-family modules, which register the built-in lowerings."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import barrier, checks, collectives, elementwise, fft, indexing, linalg, random, reduction, shape  # noqa: F401
    from . import lapack  # noqa: F401
    from . import lanes  # noqa: F401
    from . import complex_exact, float8

    float8.install()  # wraps built-in lowerings of the modules above
    complex_exact.install()  # complex mul, div, abs, exp from their parts (elementwise's lowerings for the rest)


def builtin_lowering(name: str) -> LoweringFn:
    """The built-in lowering of ``lazy.<name>``: a user lowering may return
    ``builtin_lowering("tanh")(op, rewriter)`` for the cases it leaves alone
    (or decline them). KeyError for an op with no built-in lowering."""
    load_builtin_lowerings()
    full = full_name(name)
    if full not in BUILTIN:
        raise KeyError(f"'{full}' has no built-in lowering")
    return BUILTIN[full].fn
