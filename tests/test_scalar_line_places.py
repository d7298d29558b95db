"""The scalar policy's line places (lazycore.trace.scalar_policy,
``ScalarPolicy._line_varied``) when one instruction makes several numbers
in a step, as the backward pass under a user's ``backward()`` does: those
are different numbers, which took each other for one varying number (a 0
baked in the first step was a parameter at its moved position in the
second, another program); a number among them that varies per step is
still a parameter at once at its new position in the second step."""

import numpy
import pytest

import lazycore as lc
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _scaled(x, k):
    # one instruction for every number, after one op kind (a library call's body under one user line)
    y = lc.apply("neg", x)
    s = lc.scalar(k, "f32")
    return lc.apply("mul", y, lc.apply("broadcast_in_dim", s, dims=(), shape=x.shape))


def _steps(numbers_of_step, steps):
    """Per step: the numbers, each through ``_scaled``, summed; the first
    step also holds work from before the loop (the loop's positions move
    in the second). Returns each step's compiles and which numbers were
    constants."""
    base = numpy.arange(6, dtype=numpy.float32)
    x = lc.from_numpy(base)
    lc.mark_step(wait=True)
    pre = lc.apply("abs", x)  # pending in the first step only
    compiles, baked = [], []
    for i in range(steps):
        c0 = metrics.counters()["compiles"]
        ks = numbers_of_step(i)
        parts = [_scaled(x, k) for k in ks]
        baked.append([p.value.node.operands[1][0].operands[0][0].op == "constant" for p in parts])
        y = parts[0]
        for p in parts[1:]:
            y = lc.apply("add", y, p)
        if i == 0:
            y = lc.apply("add", y, lc.apply("sub", pre, x))  # (zero: the work before the loop)
        want = sum((-base * numpy.float32(k) for k in ks), numpy.zeros(6, numpy.float32))
        numpy.testing.assert_array_equal(lc.to_numpy(y), want)
        compiles.append(metrics.counters()["compiles"] - c0)
    return compiles, baked


def test_the_first_of_two_numbers_of_one_instruction_keeps_its_fold():
    # 0.0 and 5.0 (a parameter: no fold) at one instruction, every step: the
    # 0.0 baked in the first step stays baked at its moved position in the
    # second. Before: the line promoted by 5.0 made it a parameter there
    compiles, baked = _steps(lambda i: (0.0, 5.0), 4)
    assert baked == [[True, False]] * 4, baked
    assert compiles[2:] == [0, 0], compiles


def test_a_number_varying_per_step_among_them_is_a_parameter_at_once():
    # i and 5.0: 0.0 in the first step (baked), then 1.0 at a moved
    # position: a parameter at once (baked, 2.0 would promote it a step
    # later: a compile)
    compiles, baked = _steps(lambda i: (float(i), 5.0), 5)
    assert baked == [[True, False]] + [[False, False]] * 4, baked
    assert compiles[2:] == [0, 0, 0], compiles


def _made_here(x, k):
    y = lc.apply("neg", x)
    s = lc.scalar(k, "f32")
    return lc.apply("mul", y, lc.apply("broadcast_in_dim", s, dims=(), shape=x.shape))


def _made_there(x, k):
    y = lc.apply("neg", x)
    s = lc.scalar(k, "f32")
    return lc.apply("mul", y, lc.apply("broadcast_in_dim", s, dims=(), shape=x.shape))


def _positions_met(before: int, steps: int = 3):
    """A loop whose every step makes 5.0 then 0.0 at one instruction (the
    line varies within a step: its 0.0 is a parameter), after ``before``
    nodes of other work and a 0.0 of another instruction in the first step.
    Returns which numbers were constants, per step."""
    base = numpy.arange(6, dtype=numpy.float32)
    x = lc.from_numpy(base)
    lc.mark_step(wait=True)
    pre = x
    for _ in range(before):
        pre = lc.apply("abs", pre)
    first = _made_here(pre, 0.0)
    baked = []
    for i in range(steps):
        parts = [_made_there(x, 5.0), _made_there(x, 0.0)]
        baked.append([p.value.node.operands[1][0].operands[0][0].op == "constant" for p in parts])
        y = lc.apply("add", parts[0], parts[1])
        if i == 0:
            y = lc.apply("add", y, first)
        want = -base * numpy.float32(5.0) + (-base * numpy.float32(0.0) if i == 0 else 0)
        numpy.testing.assert_array_equal(lc.to_numpy(y), want)
    return baked


@pytest.mark.parametrize("before", [0, 3, 4, 5])
def test_a_number_takes_its_own_instructions_answer_not_one_met_at_its_position_before(before):
    # the first step's work before the loop (here ``before`` nodes and a 0.0
    # of another line) put another instruction's 0.0 where the loop's 0.0
    # later lands: the answer kept per position (no frame walk for a
    # repeated number) baked it as that one was, and a later step, whose
    # entry there had moved on, made it a parameter: a compile more (a
    # packed LSTM's training loop after a test whose work died unrun)
    lc.cache.clear()
    alone = _positions_met(0)
    lc.cache.clear()
    assert _positions_met(before) == alone
