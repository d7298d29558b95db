"""Check the import contracts in pyproject.toml ([tool.importlinter]) on the package as installed.

import-linter reads a package from the folder it is installed in, and
lazycore is built from several source folders (src/lazycore, dialect/,
passes/, frontends/: pyproject's package-dir map), so an editable install
has no one folder to read. This installs the package as ``pip install .``
does, from a clean copy of its sources into a temporary folder (no
dependencies: they are the environment's), and lints that. The contracts are
then checked on exactly the modules a user gets (tests/test_install.py checks
that the editable install has the same ones).
"""

import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# what `pip install .` reads: the metadata, the readme it names, the package-dir folders
SOURCES = ("pyproject.toml", "README.md", "src", "dialect", "passes", "frontends")


def install(dest: pathlib.Path) -> pathlib.Path:
    """Install lazycore from a clean copy of the sources under ``dest``; the folder holding the package."""
    copy = dest / "source"
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, copy / name)
    site = dest / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-compile", "--target", str(site), str(copy)], check=True, cwd=dest)
    return site


def main() -> int:
    from importlinter.cli import lint_imports

    with tempfile.TemporaryDirectory() as tmp:
        site = install(pathlib.Path(tmp))
        sys.path.insert(0, str(site))  # ahead of the editable install's finder
        return lint_imports(config_filename=str(ROOT / "pyproject.toml"))


if __name__ == "__main__":
    sys.exit(main())
