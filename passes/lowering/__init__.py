"""Lowerings from ``lazy`` to StableHLO, one per op, in a registry users can extend.

Public API: :func:`register_lowering`, :func:`unregister_lowering`,
:func:`builtin_lowering`, :class:`Decline`, :func:`load_pdl_patterns`.
Built-in lowerings live in one module per op family.
"""

from .builtin import builtin_lowering, load_builtin_lowerings  # noqa: F401
from .registry import (  # noqa: F401
    BUILTIN,
    USER,
    Decline,
    Lowering,
    clear_user_patterns,
    load_pdl_patterns,
    lowering,
    lowering_for,
    lowerings_for,
    register_lowering,
    unregister_lowering,
)
