"""A barrier whose program fails stays contained (lazycore.failures).

Each failure point has a real trigger, no injection:

* lowering: a user lowering (``register_lowering``) that raises, and one that
  builds StableHLO that does not verify;
* XLA compile: a ``stablehlo.custom_call`` to a target no FFI handler is
  registered for (MLIR accepts it; XLA's compile refuses it);
* execution: a ``custom_call`` to jaxlib's LAPACK Cholesky handler
  (``lapack_spotrf_ffi``) with one result where it writes two: it compiles,
  and the handler fails when the program runs. PJRT's CPU client runs a
  cheap program inline, so the error comes from the launch itself; a larger
  one runs on its thread pool, and the error shows only when something waits
  for it (both paths are tested, and each test checks which one it took).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import lazycore as lc
from lazycore.runtime import failures
from lazycore.runtime import barrier, cache
from lazycore.observe import metrics
from lazycore.ir.config import override
from lazycore.runtime.failures import BarrierError, Failure
from lazycore.dialect.mlir import ir
from lazycore.passes import LoweringError, register_lowering
from lazycore.passes.lowering import registry
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def contained():
    """Every test leaves the lowering registry as it found it and nothing pending."""
    user, pdl = dict(registry.USER), list(registry.PDL_SOURCES)
    gc.collect()
    lc.mark_step(wait=True)
    cache.clear()  # programs counted from empty (a full cache would drop one)
    yield
    registry.USER.clear()
    registry.USER.update(user)
    registry.PDL_SOURCES[:] = pdl
    gc.collect()
    lc.mark_step(wait=True)


def raising(op, rewriter):
    raise ValueError("this lowering is broken on purpose")


def invalid_stablehlo(op, rewriter):
    """``stablehlo.add`` with one operand: MLIR's verifier refuses it."""
    x = op.operands[0]
    return ir.Operation.create("stablehlo.add", results=[x.type], operands=[x]).result


def custom_call(target: str):
    def lower(op, rewriter):
        x = op.operands[0]
        attrs = {
            "call_target_name": ir.StringAttr.get(target),
            "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        }
        return ir.Operation.create("stablehlo.custom_call", results=[x.type], operands=[x], attributes=attrs).result

    return lower


NO_SUCH_TARGET = custom_call("lazycore_test_no_such_target")  # XLA's compile refuses it
FAILS_TO_RUN = custom_call("lapack_spotrf_ffi")  # compiles; the handler wants 2 results


def ones(shape=(2, 3), value=1.0):
    return lc.from_numpy(np.full(shape, value, np.float32))


def read_fails(t, *needles):
    """Reading ``t`` raises a BarrierError naming each of ``needles``, every
    time, with no IR in its message; returns the error."""
    errors = []
    for _ in range(2):
        with pytest.raises(BarrierError) as info:
            lc.to_numpy(t)
        errors.append(info.value)
    first, second = errors
    assert first is not second and str(first) == str(second)
    for needle in needles:
        assert needle in str(first), (needle, str(first))
    assert "%0 =" not in str(first) and "note:" not in str(first) and "\n" not in str(first)
    assert first.__cause__ is not None
    assert not t.pending and "failed" in repr(t)
    return first


# --- lowering ----------------------------------------------------------------------------


def test_a_raising_lowering_fails_only_what_depends_on_its_op():
    register_lowering("sign", raising)
    a = ones()
    lr = lc.scalar(2.5, "f32")  # a scalar pack rides along in the retry
    x = lc.apply("sign", a)  # raising sign
    w = lc.apply("add", x, a)
    y = lc.apply("mul", a, lc.broadcast_to(lr, (2, 3)))
    before = cache.size()
    lc.mark_step()
    e = read_fails(x, "lazy.sign", at("raising sign"), "ValueError: this lowering is broken on purpose")
    assert (e.op, e.location, e.stage) == ("lazy.sign", at("raising sign"), "lower")
    assert isinstance(e.__cause__, LoweringError) and isinstance(e.__cause__.__cause__, ValueError)
    read_fails(w, "lazy.sign", at("raising sign"))  # it depends on the failing op: the same error
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((2, 3), 2.5, np.float32))
    assert cache.size() == before + 1  # the retry's program; the failing one is not cached
    # an op on a failed value fails the same way at its own barrier
    read_fails(lc.apply("neg", w), "lazy.sign", at("raising sign"))


def test_a_lowering_that_builds_invalid_stablehlo_names_the_lazy_op():
    register_lowering("tanh", invalid_stablehlo)
    a = ones()
    x = lc.apply("tanh", a)  # invalid tanh
    y = lc.apply("add", a, a)
    e = read_fails(x, "lazy.tanh", at("invalid tanh"), "its lowering built invalid StableHLO", "stablehlo.add")
    assert e.stage == "lower"
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((2, 3), 2.0, np.float32))


def test_compiler_lower_reports_a_raising_lowering_as_a_lowering_error():
    from lazycore.runtime import compiler

    register_lowering("tanh", raising)
    program = """
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "lazy.tanh"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    with pytest.raises(LoweringError, match="lazy.tanh.*ValueError: this lowering is broken") as info:
        compiler.lower(program)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.op.name == "lazy.tanh"


def test_every_failing_node_names_its_own_line_and_steps_repeat_consistently():
    """Three equal steps: the step plan remembered by the first is recalled by
    the others, and each step fails and computes the same way."""
    register_lowering("sign", raising)
    p = ones((4,), 3.0)
    for step in range(3):
        u = lc.apply("sign", p)  # sign one
        v = lc.apply("sign", lc.apply("neg", p))  # sign two
        p.assign(lc.apply("add", p, p))
        lc.mark_step()
        read_fails(u, at("sign one"))
        read_fails(v, at("sign two"))
        np.testing.assert_array_equal(lc.to_numpy(p), np.full((4,), 3.0 * 2 ** (step + 1), np.float32))


# --- XLA compile ---------------------------------------------------------------------------


def test_an_xla_compile_error_is_narrowed_down_by_splitting_the_outputs():
    register_lowering("sign", NO_SUCH_TARGET)
    a = ones()
    outs = [lc.apply("mul", a, ones(value=float(i))) for i in range(5)]
    x = lc.apply("sign", a)  # no handler
    w = lc.apply("add", x, a)  # uses no handler
    more = [lc.apply("add", a, ones(value=float(i))) for i in range(3)]
    lc.mark_step()
    e = read_fails(x, "lazy.sign", at("no handler"), "XLA could not compile its program", "No FFI handler")
    assert e.stage == "compile"
    read_fails(w, "lazy.add", at("uses no handler"))  # XLA's error names no op: the output's own
    for i, t in enumerate(outs):
        np.testing.assert_array_equal(lc.to_numpy(t), np.full((2, 3), float(i), np.float32))
    for i, t in enumerate(more):
        np.testing.assert_array_equal(lc.to_numpy(t), np.full((2, 3), 1.0 + i, np.float32))


def test_splitting_is_bounded(monkeypatch):
    register_lowering("sign", NO_SUCH_TARGET)
    tried = []
    run_alone = barrier.run_alone

    def counted(device, values):
        tried.append(len(values))
        return run_alone(device, values)

    monkeypatch.setattr(barrier, "run_alone", counted)
    monkeypatch.setattr(failures, "PROGRAMS_TRIED", 2)
    a = ones()
    outs = [lc.apply("mul", a, ones(value=float(i))) for i in range(7)]
    x = lc.apply("sign", a)
    lc.mark_step()
    assert len(tried) == 2
    read_fails(x, "lazy.sign")
    computed = failed = 0
    for i, t in enumerate(outs):
        try:
            np.testing.assert_array_equal(lc.to_numpy(t), np.full((2, 3), float(i), np.float32))
            computed += 1
        except BarrierError as e:
            assert "XLA could not compile its program" in str(e)
            failed += 1
    assert computed >= 4 and failed >= 1  # the first half ran; what was left when the budget ran out failed


# --- execution ----------------------------------------------------------------------------


def test_an_error_at_launch_fails_only_its_output():
    register_lowering("sign", FAILS_TO_RUN)
    a = ones((2, 2))
    x = lc.apply("sign", a)  # fails to run
    y = lc.apply("add", a, a)
    lc.mark_step()
    assert type(x.value.node.buffer) is Failure  # a cheap program: the launch itself raised
    e = read_fails(x, "lazy.sign", at("fails to run"), "its program failed while running")
    assert e.stage == "run"
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((2, 2), 2.0, np.float32))
    z = lc.apply("mul", y, y)
    np.testing.assert_array_equal(lc.to_numpy(z), np.full((2, 2), 4.0, np.float32))


def test_a_buffer_donated_to_a_failed_run_is_never_passed_again():
    register_lowering("sign", FAILS_TO_RUN)
    p = ones((2, 2), 3.0)
    q = ones((2, 2), 5.0)
    old = p.value  # held by no handle once p is updated: donated to the program
    x = lc.apply("sign", lc.apply("mul", p, p))
    p.assign(lc.apply("add", p, p))  # donated update
    y = lc.apply("add", q, q)
    lc.mark_step()
    # the failed launch consumed the donated buffer: what needs it fails
    assert type(old.node.buffer) is Failure
    read_fails(p, "lazy.add", at("donated update"),
               "an input buffer it needs was donated to a program that then failed while running")
    read_fails(x)
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((2, 2), 10.0, np.float32))
    again = lc.LazyTensor(old, lc.default_device())  # a graph still holding the old value
    after = lc.apply("neg", again)  # after the failure
    e = read_fails(after, "lazy.neg", at("after the failure"), "donated to a program that then failed")
    assert e.stage == "run"
    r = lc.apply("mul", y, q)
    np.testing.assert_array_equal(lc.to_numpy(r), np.full((2, 2), 50.0, np.float32))


def test_an_error_found_after_the_barrier_returned_is_settled_in_place():
    register_lowering("sign", FAILS_TO_RUN)
    n = 512  # not cheap: PJRT runs it on its thread pool
    a = ones((n, n))
    x = lc.apply("sign", lc.apply("mul", a, a))  # fails later
    y = lc.apply("add", a, a)
    lc.mark_step()
    assert type(x.value.node.buffer) is not Failure  # nothing known yet: the program runs
    z = lc.apply("add", y, y)  # built on a result of the failed program
    lc.mark_step()  # launches with y's buffer, then finds the failure and settles it
    np.testing.assert_array_equal(lc.to_numpy(z), np.full((n, n), 4.0, np.float32))
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((n, n), 2.0, np.float32))
    read_fails(x, "lazy.sign", at("fails later"), "its program failed while running")


def test_reading_a_result_of_a_failing_running_program_settles_it():
    register_lowering("sign", FAILS_TO_RUN)
    n = 512
    a = ones((n, n))
    x = lc.apply("sign", lc.apply("mul", a, a))  # read while running
    y = lc.apply("add", a, a)
    lc.mark_step()
    assert type(x.value.node.buffer) is not Failure
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((n, n), 2.0, np.float32))
    read_fails(x, "lazy.sign", at("read while running"))


# --- what stays behind ----------------------------------------------------------------------


def test_later_barriers_run_as_in_a_fresh_process():
    register_lowering("sign", raising)
    a = ones()
    x = lc.apply("sign", a)
    lc.mark_step(wait=True)
    read_fails(x, "lazy.sign")
    before = metrics.counters()
    b = ones((3,), 2.0)
    c = lc.apply("mul", b, b)
    np.testing.assert_array_equal(lc.to_numpy(c), np.full((3,), 4.0, np.float32))
    after = metrics.counters()
    assert after["executions"] == before["executions"] + 1  # one program: the failed x is not in it
    assert after["failed_outputs"] == before["failed_outputs"]
    registry.USER.pop("lazy.sign")
    s = lc.apply("sign", a)  # the same graph, now with a lowering that works
    np.testing.assert_array_equal(lc.to_numpy(s), np.ones((2, 3), np.float32))


def test_debug_prints_a_line_per_failure(capsys):
    register_lowering("sign", raising)
    a = ones()
    x = lc.apply("sign", a)  # debug sign
    y = lc.apply("add", a, a)
    capsys.readouterr()
    with override(debug=1):
        lc.mark_step(wait=True)
    err = capsys.readouterr().err
    assert f"cpu:0: 1 of 2 outputs failed (reading one raises): lazy.sign (recorded at {at('debug sign')})" in err
    read_fails(x)
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((2, 3), 2.0, np.float32))


# --- through the frontends -------------------------------------------------------------------


def test_torch_a_failing_op_raises_on_read_and_the_rest_runs():
    torch = pytest.importorskip("torch")
    import lazycore.torch as ltorch

    register_lowering("sign", raising)
    dev = ltorch.device()
    a = torch.tensor([1.0, -2.0, 3.0], device=dev)
    b = torch.sign(a)  # torch sign
    c = a * 2
    for _ in range(2):
        with pytest.raises(RuntimeError, match="lazy.sign") as info:
            b.cpu()
        assert isinstance(info.value, BarrierError) and at("torch sign") in str(info.value)
    torch.testing.assert_close(c.cpu(), torch.tensor([2.0, -4.0, 6.0]))
    registry.USER.pop("lazy.sign")
    d = torch.sign(a) + c  # the next step compiles and runs
    torch.testing.assert_close(d.cpu(), torch.tensor([3.0, -5.0, 7.0]))


def test_numpy_a_failing_op_raises_on_read_and_the_rest_runs():
    import lazycore.numpy as lnp

    register_lowering("sign", NO_SUCH_TARGET)
    a = lnp.asarray(np.array([1.0, -2.0, 3.0], np.float32))
    b = lnp.sign(a)  # numpy sign
    c = a * 2
    for _ in range(2):
        with pytest.raises(BarrierError, match="XLA could not compile its program") as info:
            np.asarray(b)
        assert at("numpy sign") in str(info.value)
    np.testing.assert_array_equal(np.asarray(c), np.array([2.0, -4.0, 6.0], np.float32))
    registry.USER.pop("lazy.sign")
    d = lnp.sign(a) + c
    np.testing.assert_array_equal(np.asarray(d), np.array([3.0, -5.0, 7.0], np.float32))


@pytest.mark.parametrize(
    "lowering, n",
    [(raising, 2), (NO_SUCH_TARGET, 2), (FAILS_TO_RUN, 2), (FAILS_TO_RUN, 512)],
    ids=["lowering", "compile", "run-at-launch", "run-later"],
)
def test_a_failure_keeps_nothing_of_its_barrier_alive(lowering, n):
    """A failed tensor holds its error, and the error's chain holds no
    traceback (whose frames would hold the barrier's handles)."""
    import weakref

    register_lowering("sign", lowering)
    a = ones((n, n))
    x = lc.apply("sign", a)
    y = lc.apply("add", a, a)
    gone = weakref.ref(y)
    lc.mark_step()
    np.testing.assert_array_equal(lc.to_numpy(y), np.full((n, n), 2.0, np.float32))
    read_fails(x, "lazy.sign")
    del y
    gc.collect()
    assert gone() is None
