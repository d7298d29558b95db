"""The core's layers: what loads when, and the public short names.

The import direction itself is checked by import-linter (``scripts/lint_imports.py``,
run by ``bash scripts/dev test``); these tests check what it cannot see: the
deferred imports really are deferred.
"""

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_importing_and_tracing_load_no_mlir_the_first_barrier_does():
    out = _run("""
        import os, sys
        os.environ["LAZYCORE_COMPILER_AHEAD"] = "0"  # (a frontend's import would load it on a thread: test_compiler_ahead)
        import numpy as np
        import torch
        import lazycore
        import lazycore.torch as ltorch
        import lazycore.numpy as lnp

        def mlir():
            return sorted(m for m in ("torch_mlir", "lazycore.dialect.mlir", "lazycore.dialect.build", "lazycore.passes")
                          if m in sys.modules)

        x = lazycore.from_numpy(np.ones((2, 3), np.float32))
        y = lazycore.apply("add", x, x)
        t = torch.ones(2, 3, device=ltorch.device()) * 3
        a = lnp.ones((2, 3)) + 1
        print("traced", mlir())
        print(y.numpy().tolist(), t.cpu().tolist(), a.tolist())
        print("ran", mlir())
    """)
    lines = out.splitlines()
    assert lines[0] == "traced []"
    assert lines[1] == "[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]] [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]] [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]"
    assert lines[2] == "ran ['lazycore.dialect.build', 'lazycore.dialect.mlir', 'lazycore.passes', 'torch_mlir']"


def test_lazy_opt_does_not_load_the_runtime():
    out = _run("""
        import sys
        from lazycore.passes.tools import lazy_opt
        print(sorted(m for m in ("jax", "lazycore.runtime", "lazycore.trace", "torch") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_public_short_names_are_attributes_naming_the_layer_modules():
    # lazycore.metrics *is* lazycore.observe.metrics: one object under its one
    # module name, so what is set or patched through the short name is what
    # every layer reads; no import hook makes a second module name for it.
    out = _run("""
        import sys
        import lazycore
        from lazycore import metrics, config
        import lazycore.observe.metrics, lazycore.runtime.cache, lazycore.ir.config, lazycore.observe.guards
        print(metrics is lazycore.metrics is lazycore.observe.metrics, lazycore.cache is lazycore.runtime.cache,
              config is lazycore.ir.config, lazycore.guards.guard is lazycore.observe.guards.guard,
              lazycore.metrics.__spec__.name, lazycore.metrics.__name__)
        lazycore.config.short_name_probe = 1
        print(lazycore.ir.config.short_name_probe, [f for f in sys.meta_path if type(f).__module__.startswith("lazycore")])
        try:
            import lazycore.metrics
        except ModuleNotFoundError:
            print("no module lazycore.metrics")
    """)
    assert out.split("\n")[:3] == [" ".join(["True"] * 4 + ["lazycore.observe.metrics"] * 2), "1 []",
                                   "no module lazycore.metrics"]


def test_no_module_has_two_names():
    # every public name loaded, every lazycore module in sys.modules sits under its own name only
    out = _run("""
        import sys
        import lazycore, lazycore.torch
        for name in dir(lazycore):
            getattr(lazycore, name)
        import lazycore.numpy
        from lazycore.passes.tools import lazy_opt
        print(sorted(key for key, m in sys.modules.items() if key.startswith("lazycore") and m.__name__ != key))
    """)
    assert out.strip() == "[]"


def test_observers_hear_the_runtime_through_events_alone():
    # a program using only the core API (no frontend) still gets guards and counters
    out = _run("""
        import numpy as np
        import lazycore as lc
        x = lc.from_numpy(np.ones(20_000, np.float32))  # over 64 KiB: no host copy answers the read
        with lc.guards.guard(transfers="error"):
            try:
                lc.to_numpy(lc.apply("add", x, x))
            except lc.guards.GuardError as e:
                print("refused", "device-to-host" in str(e))
        print(lc.metrics.counters()["executions"], lc.metrics.counters()["transfers_to_host"])
    """)
    assert out.split() == ["refused", "True", "1", "0"]


def test_importing_a_frontend_the_first_barrier_and_the_first_step_freeze_what_they_made_unless_told_not_to():
    code = """
        import gc, sys
        before = gc.get_freeze_count()
        import lazycore.{0}
        imported = gc.get_freeze_count()
        import lazycore
        import lazycore.numpy as lnp
        setup = [[i] for i in range(1000)]  # a model, a dataset: they live as long as the loop
        x = lnp.asarray([1.0] * 20_000)  # an upload over 64 KiB: a program, not its host copy, answers reads
        lazycore.mark_step()  # nothing to run: the setup is over
        barrier = gc.get_freeze_count()
        (x + 1).tolist()  # the first program imports the compiler
        stepped = gc.get_freeze_count()
        (lnp.ones(3) * 2).tolist()
        lazycore.mark_step()
        print(before, imported > 0, barrier >= imported + 1000, stepped > barrier,
              gc.get_freeze_count() <= stepped)  # twice: then only fewer
    """
    for frontend in ("torch", "numpy"):
        assert _run(code.format(frontend)).split() == ["0", "True", "True", "True", "True"]
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code.format("torch"))], capture_output=True, text=True,
                         timeout=300, env={**__import__("os").environ, "LAZYCORE_GC_FREEZE": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "False", "False", "False", "True"]


def test_importing_a_frontend_raises_the_collectors_first_threshold_unless_the_user_set_one():
    code = """
        import gc
        {0}
        import lazycore.torch
        print(gc.get_threshold()[0])
    """
    assert _run(code.format("")).split() == ["20000"]
    assert _run(code.format("gc.set_threshold(5000, 10, 10)")).split() == ["5000"]  # the user's own stays
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code.format(""))], capture_output=True, text=True,
                         timeout=300, env={**__import__("os").environ, "LAZYCORE_GC_THRESHOLD": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["700"]
