"""``pip install .`` and the editable install give the same package.

lazycore is built from several source folders (pyproject's package-dir map).
An editable install resolves each package through setuptools' finder, a wheel
copies the folders; a module that one has and the other lacks (a subpackage
missing from ``packages``, a folder the map does not name, a module reachable
under a second name) would work in the checkout and fail for a user, or the
other way round. The import contracts are checked on the installed package
(scripts/lint_imports.py), whose install this test shares.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _lint_imports():
    spec = importlib.util.spec_from_file_location("lint_imports", ROOT / "scripts" / "lint_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def installed_modules(site: pathlib.Path) -> list[str]:
    """Every module of the installed package, from its folders (a plain install is its files)."""
    out = []
    for path in sorted((site / "lazycore").rglob("*.py")):
        parts = path.relative_to(site).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(out)


# In a fresh process of this environment (the editable install): every
# package the import system resolves, and what its folders hold.
_EDITABLE = """
    import importlib, importlib.util, json, pkgutil
    found, todo = [], ["lazycore"]
    while todo:
        name = todo.pop()
        spec = importlib.util.find_spec(name)
        found.append(name)
        if spec.submodule_search_locations is None:
            continue
        importlib.import_module(name)  # a subpackage's spec is found through its parent
        for info in pkgutil.iter_modules(spec.submodule_search_locations, name + "."):
            todo.append(info.name)
        for package in PACKAGES:  # mapped to a folder of its own: pkgutil cannot list it
            if package.rpartition(".")[0] == name and package not in todo + found:
                todo.append(package)
    print(json.dumps(sorted(found)))
"""


def editable_modules() -> list[str]:
    import tomllib

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    code = f"PACKAGES = {packages!r}\n" + textwrap.dedent(_EDITABLE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_pip_install_and_the_editable_install_have_the_same_modules(tmp_path):
    site = _lint_imports().install(tmp_path)
    installed = installed_modules(site)
    editable = editable_modules()
    assert "lazycore.passes.tools.lazy_opt" in installed and "lazycore.dialect.mlir" in installed
    assert sorted(set(editable) - set(installed)) == [] and sorted(set(installed) - set(editable)) == []
    script = (site / "bin" / "lazy-opt").read_text()
    assert "from lazycore.passes.tools.lazy_opt import main" in script

    # and it works: a NumPy program compiled and run, and lazy-opt, from the installed folder
    env = {**os.environ, "PYTHONPATH": str(site)}  # ahead of the editable install's finder
    program = ("import lazycore, lazycore.numpy as lnp\n"
               "print(lazycore.__file__.startswith(%r), (lnp.arange(3.0) * 2 + 1).tolist())" % str(site))
    out = subprocess.run([sys.executable, "-c", program], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "[1.0,", "3.0,", "5.0]"]
    opt = subprocess.run([sys.executable, str(site / "bin" / "lazy-opt"), "--list-ops"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert opt.returncode == 0, opt.stderr
    assert "lazy.add" in opt.stdout
