"""Lowerings from ``lazy`` to StableHLO, one per op, in a registry users can extend.

Public API: :func:`register_lowering`, :func:`unregister_lowering`,
:func:`builtin_lowering`, :class:`Decline`, :func:`load_pdl_patterns`.
Built-in lowerings live in one module per op family.
"""

from .registry import (  # noqa: F401
    BUILTIN,
    USER,
    Decline,
    Lowering,
    builtin_lowering,
    clear_user_patterns,
    load_pdl_patterns,
    lowering,
    lowering_for,
    lowerings_for,
    register_lowering,
    unregister_lowering,
)

_loaded = False


def load_builtin_lowerings() -> None:
    """Import the op-family modules, which register the built-in lowerings."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import barrier, checks, collectives, elementwise, fft, indexing, linalg, random, reduction, shape  # noqa: F401
    from . import float8

    float8.install()  # wraps built-in lowerings of the modules above
