"""NumPy's floating-point errors for lazy ufuncs: warnings and ``FloatingPointError`` under ``np.errstate``.

NumPy reads the processor's floating-point status after each ufunc loop and,
as ``np.errstate`` / ``np.seterr`` say per category, warns (a
``RuntimeWarning`` "divide by zero encountered in divide"), raises
``FloatingPointError`` or does nothing. A lazy loop's values exist only when
its program runs, so the test is part of the program: for each category
whose mode at the call is not ``ignore``, a ``lazy.check`` on the result
(:mod:`lazycore.runtime.checks`) whose flag says whether the loop made

* ``divide``: an infinity from finite operands at a pole (a zero divisor,
  ``log(0)``, ``arctanh(1)``, ``0 ** -1``), or, for integer division and
  remainder, a zero divisor;
* ``over``: an infinity from finite operands anywhere else;
* ``invalid``: a NaN from operands that are not NaN.

A ``warn`` check emits NumPy's warning at the barrier, attributed to the
user's line, and changes nothing; a ``raise`` check fails the result as any
value check does (reading it raises, an instance of ``FloatingPointError``).
``call``, ``print`` and ``log`` warn; ``under`` is not checked (NumPy ignores
it by default). The modes are part of a call's signature, so a recorded loop
replays only under the modes it was recorded with.

Deviation: the checks cost a pass over every result (benchmark 3's ten
fused ops on 4M floats went from 5 ms to 110 ms with them), so under NumPy's
untouched startup state (``warn`` for divide, over and invalid, never set by
the program) lazycore checks nothing. Any ``np.errstate`` block or
``np.seterr`` call, ``np.seterr(all="warn")`` included, turns the checks on
as that state says.
"""

from __future__ import annotations

import numpy as np

from lazycore.trace import composites, core

apply = core.apply

try:  # np.errstate's current object: compared by identity, so most calls skip np.geterr()
    import contextvars

    from numpy._core._ufunc_config import _extobj_contextvar as _CURRENT

    _STARTUP = contextvars.Context().run(_CURRENT.get)  # the variable's default: never set
except ImportError:  # another NumPy layout: np.geterr() every call, and it is always honoured
    _CURRENT = _STARTUP = None

_last: list = [None, None]

_TEXT = {"divide": "divide by zero", "over": "overflow", "invalid": "invalid value"}


def modes() -> tuple[str, str, str]:
    """``np.geterr()``'s divide, over and invalid modes where the call runs;
    all ``ignore`` under NumPy's startup state (see the module docs)."""
    if _CURRENT is not None:
        now = _CURRENT.get()
        if now is _STARTUP:
            return IGNORED
        if now is _last[0]:
            return _last[1]
    e = np.geterr()
    out = (e["divide"], e["over"], e["invalid"])
    if _CURRENT is not None:
        _last[0], _last[1] = now, out
    return out


IGNORED = ("ignore", "ignore", "ignore")


def _zero(x):
    return apply("compare", x, composites.full_like(x, 0), direction="EQ")


def _equals(x, v):
    return apply("compare", x, composites.full_like(x, v), direction="EQ")


_POLES = {
    "divide": lambda a, b: _zero(b),
    "floor_divide": lambda a, b: _zero(b),
    "reciprocal": _zero,
    "log": _zero,
    "log2": _zero,
    "log10": _zero,
    "log1p": lambda a: _equals(a, -1),
    "arctanh": lambda a: _equals(apply("abs", a), 1),
    "power": lambda a, b: apply("and", _zero(a), apply("compare", b, composites.full_like(b, 0), direction="LT")),
    "float_power": lambda a, b: apply("and", _zero(a),
                                      apply("compare", b, composites.full_like(b, 0), direction="LT")),
}
"""Where an infinity from finite operands is a division by zero, not an overflow."""

_FLOAT_LOOPS = frozenset({"add", "subtract", "multiply", "divide", "floor_divide", "remainder", "fmod", "power",
                          "float_power", "square", "reciprocal", "sqrt", "exp", "exp2", "expm1", "log", "log2",
                          "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "sinh", "cosh", "arccosh",
                          "arctanh", "hypot"})
"""Float loops that can set a floating-point status flag (the others cannot:
comparisons, abs, negation, min/max, rounding, classification)."""

_INTEGER_DIVISIONS = frozenset({"floor_divide", "remainder", "fmod"})


def _any(flags):
    out = flags[0]
    for f in flags[1:]:
        out = apply("or", out, f)
    return out


def _all(flags):
    out = flags[0]
    for f in flags[1:]:
        out = apply("and", out, f)
    return out


def checked(name: str, modes: tuple, operands: list, result):
    """``result`` of ufunc ``name`` on ``operands`` (converted and broadcast),
    with the checks ``modes`` (from :func:`modes`) ask for."""
    if modes == IGNORED:
        return result
    kind = result.dtype
    divide, over, invalid = modes
    flags = []
    if kind.startswith("f") and name in _FLOAT_LOOPS and all(o.dtype.startswith(("f", "i", "u")) for o in operands):
        if divide != "ignore" or over != "ignore":
            new_inf = _all([composites.isinf(result)] + [composites.isfinite(o) for o in operands])
            pole = _POLES.get(name)
            at_pole = pole(*operands) if pole is not None else None
            if at_pole is not None:
                flags.append(("divide", divide, apply("and", new_inf, at_pole)))
                flags.append(("over", over, apply("and", new_inf, apply("not", at_pole))))
            else:
                flags.append(("over", over, new_inf))
        if invalid != "ignore":
            was_nan = [composites.isnan(o) for o in operands if o.dtype.startswith("f")]
            new_nan = composites.isnan(result)
            if was_nan:
                new_nan = apply("and", new_nan, apply("not", _any(was_nan)))
            flags.append(("invalid", invalid, new_nan))
    elif kind.startswith(("i", "u")) and name in _INTEGER_DIVISIONS:
        flags.append(("divide", divide, _zero(operands[1])))
    for category, mode, flag in flags:
        if mode != "ignore":
            result = core.check(result, flag, f"{_TEXT[category]} encountered in {name}",
                                error="FloatingPointError" if mode == "raise" else "RuntimeWarning")
    return result
