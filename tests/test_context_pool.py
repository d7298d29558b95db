"""The compiler's MLIR contexts are lent from a bounded pool, not made per program
(dialect/build.py's ContextPool): what is kept between builds, and what is dropped."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazycore as lc
import lazycore.dialect.build as build
from lazycore.dialect.build import CONTEXTS, attr_to_mlir
from lazycore.dialect.mlir import ir
from lazycore.passes import Decline, register_lowering, unregister_lowering
from lazycore.runtime import compiler

pytestmark = pytest.mark.usefixtures("restore_lowerings")  # overrides are process-wide


@pytest.fixture
def made(monkeypatch):
    """Counts the contexts made, by the pool or by anyone calling new_context."""
    count = [0]
    real = build.new_context

    def counted():
        count[0] += 1
        return real()

    monkeypatch.setattr(build, "new_context", counted)
    monkeypatch.setattr(compiler, "new_context", counted)
    return count


def _programs(n: int, start: int = 0):
    """n barriers, each a program of its own (a new shape each: a compile each)."""
    for k in range(start, start + n):
        a = lc.from_numpy(np.arange(k + 1, dtype=np.float32))
        np.testing.assert_array_equal(lc.to_numpy(lc.apply("add", a, a)), 2 * np.arange(k + 1, dtype=np.float32))


def _contexts_seen(n: int, start: int) -> list:
    """The context each of n barriers' programs was lowered in (a user lowering
    that declines: the built-in one lowers the op)."""
    seen = []

    def watch(op, rewriter):
        seen.append(op.context)
        raise Decline("only watching")

    register_lowering("tanh", watch)
    for k in range(start, start + n):
        a = lc.from_numpy(np.ones(k + 1, np.float32))
        np.testing.assert_allclose(lc.to_numpy(lc.apply("tanh", a)), np.tanh(np.ones(k + 1, np.float32)))
    return seen


def test_barriers_reuse_contexts(made):
    before = lc.metrics.counters()["compiles"]
    _programs(8, start=1000)
    assert lc.metrics.counters()["compiles"] - before == 8
    assert made[0] <= 1  # 8 before the pool: one per program


def test_a_failed_lowering_drops_its_context_and_a_good_one_keeps_it():
    first, again = _contexts_seen(2, start=1100)
    assert first is again
    boom_ctx = []

    def boom(op, rewriter):
        boom_ctx.append(op.context)
        op.context.attach_diagnostic_handler(lambda d: True)  # what a failing lowering may leave behind
        raise RuntimeError("lowering broke")

    register_lowering("tanh", boom)
    with pytest.raises(lc.BarrierError, match="lowering broke"):
        lc.to_numpy(lc.apply("tanh", lc.from_numpy(np.ones(1200, np.float32))))
    assert boom_ctx == [again]
    unregister_lowering("tanh", boom)
    (after,) = _contexts_seen(1, start=1300)
    assert after is not again


def test_a_context_is_dropped_after_its_bound_of_programs(monkeypatch, made):
    CONTEXTS.clear()
    monkeypatch.setattr(CONTEXTS, "programs", 3)
    _programs(7, start=1400)
    assert made[0] == 3  # programs 1-3, 4-6, 7


def test_a_context_is_dropped_after_its_bound_of_constant_bytes(monkeypatch):
    monkeypatch.setattr(CONTEXTS, "constant_bytes", 1 << 20)
    with CONTEXTS.lend() as ctx, ctx, ir.Location.unknown():
        attr_to_mlir("dense", np.zeros(1000, np.float32))
    with CONTEXTS.lend() as small, small, ir.Location.unknown():
        attr_to_mlir("dense", np.zeros(300_000, np.float32))  # over the bound: dropped when given back
    assert small is ctx
    with CONTEXTS.lend() as fresh:
        assert fresh is not ctx


def test_clear_drops_the_ready_contexts_and_those_lent_meanwhile():
    with CONTEXTS.lend() as ctx:
        pass
    with CONTEXTS.lend() as lent:
        assert lent is ctx
        lc.cache.clear()
    assert len(CONTEXTS) == 0
    with CONTEXTS.lend() as fresh:
        assert fresh is not ctx


def test_an_op_defined_after_the_first_compile_reaches_the_next_build_and_exit_releases_the_pool():
    """define() adds a row to the op table: a ready context loaded ``lazy``
    without it. In a child process: the op table is process-wide. At exit the
    pool is emptied by its atexit hook, before Python finalizes (a handler
    registered before lazycore's runs after it)."""
    body = textwrap.dedent("""
        import atexit, sys
        atexit.register(lambda: print("ready at exit:", len(sys.modules["lazycore.dialect.build"].CONTEXTS)))
        import numpy as np
        import lazycore as lc
        from lazycore.dialect import OpSpec, define
        from lazycore.passes import register_lowering
        from lazycore.passes.lowering import hlo
        from lazycore.runtime import compiler
        a = lc.from_numpy(np.ones(3, np.float32))
        lc.to_numpy(lc.apply("add", a, a))  # the pool has a ready context now
        late = define(OpSpec("late_twice", ("operand",), lambda x: x, summary="2x, defined late"))
        register_lowering(late.name, lambda op, rewriter: hlo.binary("add", op.operands[0], op.operands[0]))
        program = '''
        func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
          %0 = "lazy.late_twice"(%a) : (tensor<3xf32>) -> tensor<3xf32>
          return %0 : tensor<3xf32>
        }'''
        (out,) = compiler.run_module(program, [np.arange(3, dtype=np.float32)])
        assert out.tolist() == [0.0, 2.0, 4.0], out
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split("\n")[:2] == ["ok", "ready at exit: 0"], \
        (done.stdout, done.stderr[-3000:])
