"""Step checks: eager's errors that stop the whole step, raised at its barrier.

Eager torch raises some errors from a value at the call (torch.distributions'
argument validation, ``torch.linalg``'s error checks): nothing after it runs.
A lazy step cannot know the value until its program runs; reading it there
would cut the step. :func:`step_check` records the test instead and the step
goes on as if it held; the barrier that runs the step
(:mod:`lazycore.runtime.checks`, "Step checks") keeps every live handle's
value as it was at the check where the check fails, and then raises eager's
exception (``raiser``'s) naming the user's line. A value check
(:func:`lazycore.trace.core.check`) fails the values computed from one value
instead, and lets the rest of the step stand.

The frontends decide which of eager's checks may be treated so:
``lazycore.frontends.torch.step_checks`` says which.
"""

from __future__ import annotations

from lazycore.ir.context import TRACE
from lazycore.ir.graph import Value
from lazycore.ir.sourceloc import caller
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import checks
from lazycore.trace.core import apply, broadcast_to


def step_check(failed: LazyTensor, raiser, loc=None) -> None:
    """Fail the step at its barrier where any element of the i1 ``failed``
    is true: the barrier raises ``raiser()``'s exception (``raiser`` returns or
    raises it, reading the values it needs then: they hold what they held
    here), also a :class:`lazycore.BarrierError` naming ``loc`` (default: the
    user's line calling this); every live handle holds the value it holds now,
    and values made after this fail with the same error."""
    if not isinstance(failed, LazyTensor) or failed.dtype != "i1":
        raise TypeError("step_check: failed must be an i1 LazyTensor")
    if failed.shape != ():
        failed = apply("reduce_max", failed, dims=tuple(range(len(failed.shape))))
    TRACE.taint()  # a recorded lowering that registers one cannot be replayed without it
    checks.add_step(failed, raiser, loc if loc is not None else caller(), _OPS)


class _Ops:
    """The nodes a barrier adds to a step with step checks, made by this layer
    (no automatic step cut inside: the barrier is already running)."""

    @staticmethod
    def select(flag: LazyTensor, then: Value, now: Value, shaped: dict) -> Value:
        """``flag ? then : now``; ``shaped``: ``flag`` broadcast per shape, kept by the caller for its step."""
        device = flag.device
        a, b = LazyTensor(then, device), LazyTensor(now, device)
        with TRACE.cutter.holding():
            key = (id(flag), a.shape)
            pred = shaped.get(key)
            if pred is None:
                pred = shaped[key] = (flag, broadcast_to(flag, a.shape))
            return apply("select", pred[1], a, b)._value

    @staticmethod
    def any_of(flags: list) -> LazyTensor:
        with TRACE.cutter.holding():
            out = flags[0]
            for f in flags[1:]:
                out = apply("or", out, f)
            return out

    @staticmethod
    def stack(flags: list) -> LazyTensor:
        with TRACE.cutter.holding():
            out = apply("reshape", flags[0], shape=(1,))
            for f in flags[1:]:
                out = apply("concatenate", out, apply("reshape", f, shape=(1,)), dim=0)
            return out


_OPS = _Ops()
