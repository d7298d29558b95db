"""Value checks inside loop and branch bodies: each becomes a flag the loop
carries (or the branch yields), and the loop's results fail at the barrier
with eager's error and the body's line, as a check outside a loop does."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops import scan

import lazycore
import lazycore.torch as ltorch
from lazycore import BarrierError
from lazycore.observe import metrics
from lazycore.observe.testing import capture


def _floor_loop(dev, divisor):
    x = torch.tensor([7, 9, 12], device=dev)
    d = torch.tensor(divisor, device=dev)
    return lazycore.fori_loop(0, 3, lambda i, v: v // d + 1, x)  # the body's line


def test_a_loop_without_a_failing_value_gives_eager_values(dev, clean_runtime):
    got = _floor_loop(dev, [2, 3, 1]).cpu()
    want = torch.tensor([7, 9, 12])
    for _ in range(3):
        want = want // torch.tensor([2, 3, 1]) + 1
    torch.testing.assert_close(got, want)


def test_division_by_zero_in_a_loop_body_raises_eagers_error_naming_the_body_line(dev, clean_runtime):
    with capture() as cap:
        r = _floor_loop(dev, [2, 0, 1])
        other = (torch.arange(3, device=dev) * 2).sum()  # pending beside it: unaffected
        with pytest.raises(RuntimeError, match="ZeroDivisionError") as info:
            r.cpu()
    assert isinstance(info.value, BarrierError)
    assert "test_checks_in_bodies.py" in str(info.value)
    with pytest.raises(RuntimeError):
        torch.tensor([7]) // torch.tensor([0])  # eager's type
    assert other.item() == 6
    assert cap.text("stablehlo").count("stablehlo.while") == 1
    # the flag is part of the loop's carry, not a second loop or a host round trip
    assert metrics.counters()["compiles"] == 1


def test_a_check_in_the_branch_not_taken_fails_nothing(dev, clean_runtime):
    def run(pred, divisor):
        x = torch.tensor([7, 9, 12], device=dev)
        d = torch.tensor(divisor, device=dev)
        return torch.cond(torch.tensor(pred, device=dev), lambda a, b: a // b, lambda a, b: a * b, (x, d))

    torch.testing.assert_close(run(False, [1, 0, 3]).cpu(), torch.tensor([7, 0, 36]))
    torch.testing.assert_close(run(True, [1, 2, 3]).cpu(), torch.tensor([7, 4, 4]))
    # the pred has changed at one place of the step graph: a program parameter from now on (the
    # first call records the factories whose constants later calls share, so its places are its own)
    torch.testing.assert_close(run(False, [1, 2, 3]).cpu(), torch.tensor([7, 18, 36]))
    before = metrics.counters()["compiles"]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        run(True, [1, 0, 3]).cpu()
    torch.testing.assert_close(run(False, [0, 0, 3]).cpu(), torch.tensor([0, 0, 36]))
    assert metrics.counters()["compiles"] == before  # a failing flag is a value, not another program


def test_a_check_in_a_scan_step_fails_the_scans_results(dev, clean_runtime):
    def f(c, x):
        q = c // x
        return q + c, q

    for xs, fails in (([1, 2, 3], False), ([1, 0, 3], True)):
        init = torch.tensor(5, device=dev)
        c, ys = scan(f, init, torch.tensor(xs, device=dev))
        if fails:
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                ys.cpu()
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                c.cpu()
        else:
            want_c, want_ys = torch.tensor(5), []
            for x in xs:
                q = want_c // x
                want_c, _ = q + want_c, want_ys.append(q)
            torch.testing.assert_close(c.cpu(), want_c)
            torch.testing.assert_close(ys.cpu(), torch.stack(want_ys))


def test_a_check_in_a_loops_condition_is_refused_at_the_call(dev, clean_runtime):
    d = torch.tensor(0, device=dev)
    with pytest.raises(NotImplementedError, match="cond_fun"):
        lazycore.while_loop(lambda v: (v // d) < 10, lambda v: v + 1, torch.tensor(1, device=dev))
