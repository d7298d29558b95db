"""Lowering of ``lazy.check`` (see lazycore.dialect.checks)."""

from __future__ import annotations

from .registry import lowering


@lowering("check")
def _check(op, rewriter):
    # The value passes through. The runtime made the flag an output of the
    # program before any pass ran (lazycore.runtime.checks), so dropping the
    # op here loses nothing; a module lowered on its own has no reader for it.
    return op.operands[0]
