"""Value checks: eager's errors that only the values can tell.

Eager torch raises at the call when, say, an integer is divided by zero; a
lazy program knows its values only once it has run. ``lazy.check`` carries
such a test into the program: its result is its operand, and its ``failed``
flag becomes an extra output of the barrier's program
(:mod:`lazycore.runtime.checks`). When the flag comes back true, every value
computed from the check's result fails (reading one raises
:class:`lazycore.BarrierError` with ``message`` and the line that recorded
the check; the error is also the builtin exception ``error`` names, eager's
type), and the rest of the program's results stand.
"""

from __future__ import annotations

from .rules import require_dtype, require_rank
from .spec import op
from .types import ShapeError, TensorType


ERRORS = ("RuntimeError", "ValueError", "IndexError", "FloatingPointError", "LinAlgError", "ZeroDivisionError",
          "RuntimeWarning")
"""What a failed check raises as well as lazycore.BarrierError: eager's type.
``RuntimeWarning`` (NumPy's floating-point warnings) fails nothing: the
warning is emitted with the check's message and line, and the values stand."""


@op("check", ("operand", "failed"), attrs={"message": "str", "error": "str"}, padding="own")
def _check(operand: TensorType, failed: TensorType, *, message, error):
    """operand, unchanged; the values computed from it fail at their barrier with message (an error of type error too) when failed (i1, rank 0) is true"""
    require_dtype("failed", failed, "bool")
    require_rank(failed, 0, "failed")
    if error not in ERRORS:
        raise ShapeError(f"error must be one of {', '.join(ERRORS)}, got '{error}'")
    return operand
