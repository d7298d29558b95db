"""Value checks (lazycore.runtime.checks): eager's errors that only values can tell.

``lazycore.check(x, failed, message)`` is ``x``; the program returns the
check's flag after its outputs, and when it is true every value computed from
the check's result fails: each read raises BarrierError with the message and
the line that recorded the check (stage ``"check"``), and the rest of the
program's results stand. These tests use the core API alone, with the
integer-division check the torch frontend records.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import lazycore as lc
from lazycore.dialect import ShapeError
from lazycore.ir.config import override
from lazycore.observe import metrics
from lazycore.passes import register_lowering
from lazycore.passes.lowering import registry
from lazycore.runtime import cache
from lazycore.runtime.failures import BarrierError
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def fresh():
    user = dict(registry.USER)
    gc.collect()
    lc.mark_step(wait=True)
    cache.clear()
    metrics.reset()
    yield
    registry.USER.clear()
    registry.USER.update(user)
    gc.collect()
    lc.mark_step(wait=True)


def ints(*values):
    return lc.from_numpy(np.array(values, np.int32))


def by_zero(b):
    """Where ``b`` is 0: the flag of torch's integer-division check."""
    zero = lc.broadcast_to(lc.apply("constant", value=np.int32(0)), b.shape)
    return lc.apply("compare", b, zero, direction="EQ")


def div(a, b):
    return lc.apply("div", a, b)


def fails(t, where):
    """Reading ``t`` raises the check's BarrierError, every time."""
    for _ in range(2):
        with pytest.raises(BarrierError) as info:
            lc.to_numpy(t)
        e = info.value
        assert (e.op, e.location, e.stage) == ("lazy.check", where, "check")
        assert str(e) == f"lazy.check (recorded at {where}): ZeroDivisionError"
        assert isinstance(e, RuntimeError)  # torch's ZeroDivisionError is a RuntimeError
    assert not t.pending and "failed" in repr(t)


def test_a_check_that_holds_changes_nothing():
    a, b = ints(7, -7, 9), ints(2, 2, -3)
    q = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")
    lc.mark_step()
    np.testing.assert_array_equal(lc.to_numpy(q), [3, -3, -3])
    assert metrics.counters()["failed_outputs"] == 0


def test_a_failing_check_fails_what_depends_on_it_and_nothing_else():
    a, b = ints(7, -7, 9), ints(2, 0, -3)
    q = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")  # failing check
    w = lc.apply("add", q, a)
    y = lc.apply("mul", a, a)
    lc.mark_step()  # returns before the program finished: the read waits for its checks
    fails(q, at("failing check"))
    fails(w, at("failing check"))
    np.testing.assert_array_equal(lc.to_numpy(y), [49, 49, 81])
    assert metrics.counters()["failed_outputs"] == 2
    # values computed from a failed one fail the same way at their own barrier
    fails(lc.apply("neg", w), at("failing check"))
    # and the next steps run as in a fresh process
    one = ints(1, 1, 1)
    np.testing.assert_array_equal(lc.to_numpy(lc.check(div(a, one), by_zero(one), "ZeroDivisionError")), [7, -7, 9])


def test_a_failed_check_is_settled_before_the_next_program_reads_its_result():
    a = ints(4, 5, 6)
    b = ints(0, 1, 1)
    q = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")  # settled before the next program
    lc.mark_step()  # not waited for
    r = lc.apply("add", q, a)  # the next program would read q's buffer
    s = lc.apply("sub", a, a)
    lc.mark_step(wait=True)
    fails(r, at("settled before the next program"))
    np.testing.assert_array_equal(lc.to_numpy(s), [0, 0, 0])


def test_only_the_checks_that_fail_count_and_recalled_steps_line_them_up():
    """Two checks per step, one failing in one step only: the same program every
    step (the walk recalled), and the flags name the right check."""
    a = ints(8, 9, 10)
    results = []
    for step in range(3):
        b, c = ints(1, 3, 5), ints(2, 0 if step == 1 else 1, 2)
        first = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")  # first check
        second = lc.check(div(a, c), by_zero(c), "ZeroDivisionError")  # second check
        results.append((first, second))
        lc.mark_step(wait=True)
    assert metrics.counters()["compiles"] == 1
    for step, (first, second) in enumerate(results):
        np.testing.assert_array_equal(lc.to_numpy(first), [8, 3, 2])
        if step == 1:
            fails(second, at("second check"))
        else:
            np.testing.assert_array_equal(lc.to_numpy(second), [4, 9, 5])


def test_checks_hold_in_the_programs_that_contain_another_failure():
    """A lowering failure in the same barrier: the rest runs again as its own
    program (lazycore.runtime.failures), and that program's checks count too."""
    register_lowering("tanh", lambda op, rewriter: (_ for _ in ()).throw(ValueError("broken on purpose")))
    a = ints(3, 4, 5)
    t = lc.apply("tanh", lc.from_numpy(np.ones(3, np.float32)))
    b = ints(1, 0, 1)
    q = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")  # check in a retry
    y = lc.apply("add", a, a)
    lc.mark_step(wait=True)
    with pytest.raises(BarrierError, match="lazy.tanh"):
        lc.to_numpy(t)
    fails(q, at("check in a retry"))
    np.testing.assert_array_equal(lc.to_numpy(y), [6, 8, 10])


def test_a_check_whose_result_nothing_uses_is_no_part_of_the_program():
    a = ints(1, 2, 3)
    b = ints(0, 0, 0)
    lc.check(div(a, b), by_zero(b), "ZeroDivisionError")  # its result is dropped at once
    y = lc.apply("add", a, a)
    # a barrier, not a read: a read of small integer uploads' work is answered on the host
    with lc.testing.capture() as cap:
        lc.mark_step(wait=True)
    np.testing.assert_array_equal(lc.to_numpy(y), [2, 4, 6])
    cap.check("CHECK-NOT: lazy.check", stage="lazy")
    assert metrics.counters()["failed_outputs"] == 0


def test_the_flags_are_outputs_of_the_program_after_its_results():
    a = ints(1, 2, 3)
    b = ints(1, 1, 1)
    q = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")
    with lc.testing.capture() as cap:
        lc.mark_step(wait=True)  # (a read would be answered from the uploads' host copies)
    np.testing.assert_array_equal(lc.to_numpy(q), [1, 2, 3])
    cap.check("CHECK: func.func @main({{.*}}) -> (tensor<3xi32>, tensor<i1>)", stage="stablehlo")


def test_without_replay_or_plans_the_same():
    with override(replay=False):
        a = ints(5, 6)
        b = ints(0, 2)
        q = lc.check(div(a, b), by_zero(b), "ZeroDivisionError")  # without replay
        lc.mark_step(wait=True)
        fails(q, at("without replay"))


def test_a_check_raises_eagers_exception_type_too():
    """A check standing for NumPy's negative integer power raises a BarrierError
    that is a ValueError, so code catching eager's type catches it."""
    a = ints(2, 3)
    b = ints(1, -1)
    zero = lc.broadcast_to(lc.apply("constant", value=np.int32(0)), b.shape)
    negative = lc.apply("compare", b, zero, direction="LT")
    message = "Integers to negative integer powers are not allowed."
    p = lc.check(lc.apply("pow", a, b), negative, message, error="ValueError")  # value check
    with pytest.raises(ValueError, match="Integers to negative integer powers") as info:
        lc.to_numpy(p)
    e = info.value
    assert isinstance(e, BarrierError) and (e.location, e.stage) == (at("value check"), "check")
    # what is computed from it later raises the same type
    with pytest.raises(ValueError):
        lc.to_numpy(lc.apply("add", p, a))
    # only eager's types, named at the call
    with pytest.raises(ShapeError, match="error must be one of"):
        lc.check(a, by_zero(b), "x", error="KeyError")
