"""The barrier sits on top of its stages (issue 42): runtime/barrier.py imports
its stages (collect, planning, transforms, programs, launches, containment)
and no module it reaches imports it back, deferred imports inside functions
included; the modules that do import it are its callers (reads, transfers,
automatic steps), which it never reaches. The architecture picture's own
checks (every module named, no module named that does not exist) are
tests/test_docs.py's."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "src" / "lazycore" / "runtime"
PACKAGE = "lazycore.runtime"
BARRIER = f"{PACKAGE}.barrier"


def _modules() -> dict[str, Path]:
    return {f"{PACKAGE}.{p.stem}": p for p in sorted(RUNTIME.glob("*.py")) if p.name != "__init__.py"}


def imports(path: Path, modules) -> set[str]:
    """The runtime modules the file at ``path`` imports, anywhere in it
    (``from lazycore.runtime import x`` imports module ``x``; relative
    imports resolved against the runtime package)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = PACKAGE.rsplit(".", node.level - 1)[0] if node.level > 1 else PACKAGE
                module = base + ("." + node.module if node.module else "")
            else:
                module = node.module
            names = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        out.update(n for n in names if n in modules)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: imports(path, modules) for name, path in modules.items()}


def _reached(graph, start: str) -> set[str]:
    seen, todo = set(), list(graph[start])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    return seen


def test_no_module_the_barrier_reaches_imports_it_back():
    graph = _graph()
    reached = _reached(graph, BARRIER)
    assert {"lazycore.runtime.step", "lazycore.runtime.planning", "lazycore.runtime.transforms",
            "lazycore.runtime.programs", "lazycore.runtime.launches"} <= reached  # its stages
    back = sorted(m for m in reached if BARRIER in graph[m])
    assert BARRIER not in reached and back == [], f"imported back by {back}"


def test_the_modules_that_import_the_barrier_are_above_it():
    graph = _graph()
    callers = {m for m, targets in graph.items() if BARRIER in targets}
    assert callers, "nothing imports the barrier: the scan reads no imports"
    assert callers.isdisjoint(_reached(graph, BARRIER))


def test_the_scan_sees_deferred_and_relative_imports(tmp_path):
    """The check can fail: an import inside a function, or a relative one, counts."""
    modules = _modules()
    f = tmp_path / "stage.py"
    f.write_text("def later():\n    from lazycore.runtime import barrier\n")
    assert imports(f, modules) == {BARRIER}
    f.write_text("def later():\n    from . import barrier\n    from .barrier import sync\n")
    assert imports(f, modules) == {BARRIER}
    f.write_text("import lazycore.runtime.barrier as b\n")
    assert imports(f, modules) == {BARRIER}
