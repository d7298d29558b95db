"""``lazycore.passes`` (and ``dialect``, ``frontends``, ``numpy``, ``torch``) after
a plain ``import lazycore``, as ``jax.numpy`` after ``import jax`` (issue 43's
paper cut ``lazycore.passes.load_pdl_patterns("neg.pdl")``): before, the
attribute existed only once something had imported the package, so after
``import lazycore.torch`` it raised AttributeError or not depending on how far
the background compiler import had got (docs/guides/torch.md's
``lazycore.passes.pipeline.CHANNELS_LAST_PRODUCTS_PIPELINE``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str) -> str:
    env = {**os.environ, "LAZYCORE_CACHE_DIR": "off", "LAZYCORE_COMPILER_AHEAD": "0"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_each_subpackage_is_an_attribute_of_a_plain_import():
    out = _run("""
        import sys
        import lazycore
        before = sorted(m for m in sys.modules if m.startswith(("lazycore.passes", "lazycore.dialect", "jax", "torch")))
        print(before)
        print(lazycore.passes is sys.modules["lazycore.passes"], callable(lazycore.passes.load_pdl_patterns))
        print(lazycore.dialect is sys.modules["lazycore.dialect"], lazycore.frontends.__name__)
        print(lazycore.numpy.asarray is sys.modules["lazycore.numpy"].asarray, lazycore.torch.device().type)
        try:
            lazycore.not_a_name
        except AttributeError as e:
            print(e)
    """)
    assert out.splitlines() == ["[]", "True True", "True lazycore.frontends", "True lazy",
                                "module 'lazycore' has no attribute 'not_a_name'"], out


def test_the_pipeline_the_torch_guide_names_resolves_right_after_importing_the_frontend():
    out = _run("""
        import lazycore, lazycore.torch
        print(lazycore.passes.pipeline.CHANNELS_LAST_PRODUCTS_PIPELINE is not None)
    """)
    assert out.split() == ["True"]


def test_a_module_of_the_passes_package_resolves_as_an_attribute():
    out = _run("""
        import lazycore.passes
        print(callable(lazycore.passes.pipeline.default_for), lazycore.passes.rolled_chains.MIN_COPIES > 0)
        try:
            lazycore.passes.no_such_module
        except AttributeError as e:
            print(e)
    """)
    assert out.splitlines() == ["True True", "module 'lazycore.passes' has no attribute 'no_such_module'"], out
