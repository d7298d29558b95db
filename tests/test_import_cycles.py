"""No import circle among the modules of any package of lazycore.

A circle makes a package one tangle: no module of it can be read, tested or
moved without the others, and which one finishes loading first depends on
who imports first. Every import counts, the ones inside functions too (they
only hide the circle until run time). A package's ``__init__`` that only
hands names on is no module of a circle: ``from lazycore.passes import X``
counts as an import of the module X comes from, where the ``__init__``
says so; an ``__init__`` that does more (defines functions, runs code) is
one, under the package's name. A subpackage counts as one module of its parent (a circle through
``passes.lowering`` back into ``passes`` is one of ``passes``). The layers
among themselves (``lazycore``'s own subpackages) are import-linter's to
check: pyproject's contracts, which name the deferred imports they allow.

The modules are read from the source folders pyproject's package-dir map
installs (tests/test_install.py checks that an installed package has the
same ones).
"""

from __future__ import annotations

import ast
import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _packages() -> dict[str, pathlib.Path]:
    """Package name -> its folder, as pyproject installs them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = config["package-dir"]
    out = {}
    for package in config["packages"]:
        if package in dirs:
            out[package] = ROOT / dirs[package]
        else:
            parent, _, name = package.rpartition(".")
            out[package] = out[parent] / name if parent in out else ROOT / dirs[parent] / name
    return out


PACKAGES = _packages()


def _modules(package: str) -> dict[str, pathlib.Path]:
    """Module name -> file of the package's own modules (``__init__`` under the package's name)."""
    folder = PACKAGES[package]
    out = {package: folder / "__init__.py"}
    for f in sorted(folder.glob("*.py")):
        if f.name != "__init__.py":
            out[f"{package}.{f.stem}"] = f
    return out


def _imports(name: str, path: pathlib.Path) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                module = anchor + ("." + node.module if node.module else "")
            else:
                module = node.module
            out += [(module, alias.name) for alias in node.names]
    return out


def _handed_on(package: str) -> dict[str, str]:
    """Name -> module of the package's own that its ``__init__`` takes it from."""
    modules = _modules(package)
    out = {}
    for module, name in _imports(package, modules[package]):
        if name is not None and module in modules and module != package:
            out[name] = module
        elif name is not None and f"{module}.{name}" in modules:
            out[name] = f"{module}.{name}"
    return out


_HANDING_ON = ("__getattr__", "__dir__")  # an __init__'s functions that only hand names on (lazily)
_NAME_TABLES = ("sorted", "dict", "set", "frozenset", "list", "tuple")  # calls that only build a table of names


def _a_name_table(stmt: ast.stmt) -> bool:
    """An assignment of literals (``__all__``, a name -> module table), built with no call but ``sorted(...)`` & co."""
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
        return False
    for n in ast.walk(stmt.value):
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _NAME_TABLES):
            return False
        if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)):
            return False
    return True


def hands_names_on_only(path: pathlib.Path) -> bool:
    """Does the ``__init__`` at ``path`` only hand names on (imports, name tables,
    ``__all__``, a ``__getattr__`` that loads a module for a name)?"""
    for stmt in ast.parse(path.read_text(), str(path)).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or _a_name_table(stmt):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):  # the docstring
            continue
        if isinstance(stmt, ast.FunctionDef) and stmt.name in _HANDING_ON:
            continue
        return False
    return True


def _node(package: str, target: str) -> str | None:
    """The module of ``package``'s graph that ``target`` is or lies in (a subpackage as one), or None."""
    if not target.startswith(package + "."):
        return None
    return f"{package}.{target[len(package) + 1:].split('.')[0]}"


def graph(package: str) -> dict[str, set[str]]:
    """The package's modules and subpackages and which of them each imports; its
    ``__init__`` (under the package's name) only when it does more than hand names on."""
    subpackages = [p for p in PACKAGES if p.rpartition(".")[0] == package]
    nodes = {m for m in _modules(package) if m != package} | set(subpackages)
    handed_on = _handed_on(package)
    if not hands_names_on_only(_modules(package)[package]):
        nodes.add(package)

    def reached(target: str, name: str | None) -> str | None:
        if target == package:  # `from package import name`: a module, a name its __init__ hands on, or its own
            if name is not None and f"{package}.{name}" in nodes:
                return f"{package}.{name}"
            return handed_on.get(name, package)
        return _node(package, target if name is None else f"{target}.{name}")

    edges: dict[str, set[str]] = {m: set() for m in nodes}
    for node in nodes:
        # a module, or every module of a subpackage
        inner = [p for p in PACKAGES if p == node or p.startswith(node + ".")] if node != package else []
        inner = inner or [None]
        files = _modules(package).items() if inner == [None] else [
            item for p in inner for item in _modules(p).items()]
        for module, path in files:
            if inner == [None] and module != node:
                continue
            for target, name in _imports(module, path):
                to = reached(target, name)
                if to is not None and to != node and to in nodes:
                    edges[node].add(to)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", sorted(p for p in PACKAGES if p != "lazycore"))
def test_no_import_circle_among_a_packages_modules(package):
    assert circles(graph(package)) == []


def test_the_check_sees_a_circle_through_a_function_local_import(tmp_path, monkeypatch):
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "__init__.py").write_text("from .a import f\n")
    (folder / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (folder / "b.py").write_text("from .sub import g\n")
    (folder / "c.py").write_text("from pkg import f\n")  # through the __init__ to a: no circle with a
    (folder / "sub" / "__init__.py").write_text("")
    (folder / "sub" / "g.py").write_text("from pkg.a import f\n")
    monkeypatch.setitem(PACKAGES, "pkg", folder)
    monkeypatch.setitem(PACKAGES, "pkg.sub", folder / "sub")
    edges = graph("pkg")
    assert edges == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.sub"}, "pkg.c": {"pkg.a"}, "pkg.sub": {"pkg.a"}}
    assert circles(edges) == [["pkg.a", "pkg.b", "pkg.sub"]]


def test_an_init_that_does_more_than_hand_names_on_is_a_module_of_the_circle(tmp_path, monkeypatch):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("__all__ = sorted({'load'})\n\ndef load():\n    from . import a\n")
    (folder / "a.py").write_text("def f():\n    from pkg import load\n")
    monkeypatch.setitem(PACKAGES, "pkg", folder)
    assert not hands_names_on_only(folder / "__init__.py")
    assert circles(graph("pkg")) == [["pkg", "pkg.a"]]
    (folder / "__init__.py").write_text("from .a import f\n\ndef __getattr__(name):\n    return name\n")
    assert hands_names_on_only(folder / "__init__.py") and circles(graph("pkg")) == []
