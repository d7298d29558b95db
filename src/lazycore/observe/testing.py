"""FileCheck tests for what a Python snippet compiles, for authors of lowerings.

:func:`capture` records the modules of every graph that barriers compile
inside a ``with`` block: the ``lazy`` module before the pass pipeline, after
each pass, and the StableHLO handed to XLA. :meth:`Capture.check` runs
FileCheck directives against them::

    import lazycore.observe.testing

    with lazycore.testing.capture() as cap:
        (x.to(dev) * 2).cpu()
    cap.check("CHECK: lazy.mul", stage="lazy")
    cap.check("CHECK: stablehlo.multiply", stage="stablehlo")

A failing check raises :class:`AssertionError` with FileCheck's message and
the checked text. Stages: ``"lazy"`` (before the pipeline), ``"stablehlo"``
(after it), ``"both"`` (each graph's lazy module followed by its StableHLO,
one input, so ordered directives can span both), ``"lowered"`` (the lazy
module ``lazy-to-stablehlo`` took, after every lazy-level pass: count ops
there, where one ``lazy.tanh`` is one op, not the dozens of StableHLO ops an
exact lowering may build it from), or the name of a pipeline pass
(``"lazy-canonicalize"``: the module right after that pass).

A graph compiled before the block is a cache hit inside it and compiles
nothing, so by default the block starts with an empty view of the compile
cache (``fresh_cache=True``), with the persistent compile cache off: every
barrier inside compiles and is captured; the programs cached before are back
afterwards, next to the new ones.

FileCheck is the ``filecheck`` Python package (``pip install filecheck``, in
lazycore's ``test`` extra), run as ``python -m filecheck``;
:data:`FILECHECK` may name another command, such as LLVM's ``FileCheck``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from lazycore.ir.config import override
from lazycore.observe import inspect_graph
from lazycore.runtime.cache import CACHE

__all__ = ["Capture", "CapturedGraph", "FILECHECK", "capture", "check", "filecheck", "print_ir"]

FILECHECK: list[str] = [sys.executable, "-m", "filecheck"]
"""The FileCheck command; the check file is appended, the input comes on stdin."""


@dataclass
class CapturedGraph:
    """The stages of one compiled graph, as MLIR text."""

    stages: list[tuple[str, str]] = field(default_factory=list)
    """(stage name, module text) in pipeline order: ``input``, each pass, ``stablehlo``."""
    complete: bool = False
    """False when the pipeline failed part way (the stages before the failure are kept)."""

    @property
    def lazy(self) -> str:
        return self.stages[0][1]

    @property
    def stablehlo(self) -> str:
        if not self.complete:
            raise LookupError("this graph's pipeline did not finish: no StableHLO")
        return self.stages[-1][1]

    def text(self, stage: str) -> str:
        if stage == "lazy":
            return self.lazy
        if stage == "stablehlo":
            return self.stablehlo
        if stage == "both":
            return f"{self.lazy}\n// ----- stablehlo -----\n{self.stablehlo}"
        if stage == "lowered":
            names = [n for n, _ in self.stages]
            if "lazy-to-stablehlo" not in names:
                raise KeyError("no stage 'lowered': this pipeline has no lazy-to-stablehlo")
            return self.stages[names.index("lazy-to-stablehlo") - 1][1]
        # The last stage of that name: a pass listed twice reads as its final run.
        for name, text in reversed(self.stages[1:-1] if self.complete else self.stages[1:]):
            if name == stage:
                return text
        known = ["lazy", "stablehlo", "both", "lowered"] + [n for n, _ in self.stages[1:-1]]
        raise KeyError(f"no stage '{stage}' (known: {', '.join(dict.fromkeys(known))})")


class _Sink:
    def __init__(self, graph: CapturedGraph, locations: bool):
        self.graph = graph
        self.locations = locations

    def stage(self, name: str, text) -> None:
        self.graph.stages.append((name, text(self.locations)))

    def end(self) -> None:
        self.graph.complete = True


class Capture:
    """The graphs compiled inside a :func:`capture` block, in compile order."""

    def __init__(self, locations: bool = False):
        self.locations = locations
        self.graphs: list[CapturedGraph] = []

    # observer protocol of lazycore.inspect_graph.OBSERVERS
    def begin(self, walk):
        graph = CapturedGraph()
        self.graphs.append(graph)
        return _Sink(graph, self.locations)

    def text(self, stage: str = "lazy", graph: int | None = None) -> str:
        """The captured text of ``stage``: of graph number ``graph``, or of all
        graphs one after another (separated by ``// ----- graph N -----``)."""
        if not self.graphs:
            raise AssertionError("no graph was compiled inside the capture block (nothing pending at a barrier?)")
        if graph is not None:
            return self.graphs[graph].text(stage)
        return "\n".join(f"// ----- graph {i} -----\n{g.text(stage)}" for i, g in enumerate(self.graphs))

    def check(self, directives: str, stage: str = "lazy", graph: int | None = None, *, options=()) -> None:
        """Run FileCheck ``directives`` against :meth:`text`; AssertionError if they fail.

        ``options``: extra FileCheck flags (``["--check-prefix", "LAZY"]``).
        """
        filecheck(self.text(stage, graph), directives, options=options, what=f"stage '{stage}'")


@contextlib.contextmanager
def capture(*, locations: bool = False, fresh_cache: bool = True):
    """Record every graph compiled inside the block (see the module docstring).

    ``locations=True`` keeps MLIR locations (``loc(...)``) in the text, so
    directives can check the user's file:line.
    """
    cap = Capture(locations)
    saved = None
    if fresh_cache:
        saved = CACHE._entries.copy()
        CACHE._entries.clear()
    inspect_graph.OBSERVERS.append(cap)
    # a program loaded from the persistent cache is not lowered: nothing to capture
    try:
        with override(cache_dir="off") if fresh_cache else contextlib.nullcontext():
            yield cap
    finally:
        inspect_graph.OBSERVERS.remove(cap)
        if saved is not None:
            new = CACHE._entries.copy()
            CACHE._entries.clear()
            CACHE._entries.update(saved)
            for key, exe in new.items():  # the new programs are the most recently used
                CACHE.put(key, exe)


def check(snippet, directives: str, stage: str = "lazy", **capture_options) -> Capture:
    """Run ``snippet()`` inside :func:`capture`, then check ``directives`` on ``stage``."""
    with capture(**capture_options) as cap:
        snippet()
    cap.check(directives, stage)
    return cap


def print_ir(fn=None, *, stage: str = "both", locations: bool = False):
    """Run ``fn()`` inside :func:`capture` and print what it compiled: a line
    ``// TEST: <fn's name>``, then each graph's ``stage`` text (default: its
    ``lazy`` module, then ``// ----- stablehlo -----`` and its StableHLO).

    For lit tests in the style of torch-mlir's and JAX's (``# RUN: %PYTHON %s
    | FileCheck %s``, ``lit_tests/frontends/``): used as a decorator, it runs
    the function where it is defined and returns it::

        @lazycore.testing.print_ir
        def add():
            (x + y).cpu()
        # CHECK-LABEL: TEST: add
        # CHECK: lazy.add
    """

    def run(f):
        print(f"// TEST: {f.__name__}")
        with capture(locations=locations) as cap:
            f()
        print(cap.text(stage), flush=True)
        return f

    return run if fn is None else run(fn)


def filecheck(text: str, directives: str, *, options=(), what: str = "input") -> None:
    """Run FileCheck with ``directives`` (the check file's text) on ``text``.

    Raises AssertionError carrying FileCheck's message, then the input.
    """
    with tempfile.TemporaryDirectory(prefix="lazycore-filecheck-") as tmp:
        checks = os.path.join(tmp, "checks.txt")
        with open(checks, "w", encoding="utf-8") as f:
            f.write(directives if directives.endswith("\n") else directives + "\n")
        try:
            proc = subprocess.run(
                [*FILECHECK, *options, checks], input=text, capture_output=True, text=True, encoding="utf-8"
            )
        except FileNotFoundError as e:
            raise RuntimeError(f"cannot run FileCheck ({' '.join(FILECHECK)}): {e}") from None
    if proc.returncode != 0:
        message = (proc.stderr + proc.stdout).strip()
        if "No module named filecheck" in message:
            raise RuntimeError("lazycore.testing needs the 'filecheck' package: pip install filecheck")
        raise AssertionError(f"FileCheck failed on {what}:\n{message}\n--- checked text ---\n{text}")
