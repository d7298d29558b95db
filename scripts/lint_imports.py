"""Check the import contracts in pyproject.toml ([tool.importlinter]).

import-linter finds a package's modules by walking its folder, but lazycore is
installed from several folders (src/lazycore, dialect/, passes/, frontends/:
pyproject's package-dir map). This assembles them as one package tree in a
temporary folder, exactly as the map installs them, and lints that.
"""

import pathlib
import shutil
import sys
import tempfile
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def assemble(dest: pathlib.Path) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = config["package-dir"]
    for package in config["packages"]:
        source = ROOT / dirs[package] if package in dirs else None
        if source is None:  # a subpackage that lives in its parent's folder
            parent, _, name = package.rpartition(".")
            source = ROOT / dirs[parent] / name
        target = dest.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for f in source.glob("*.py"):
            shutil.copy(f, target / f.name)


def main() -> int:
    from importlinter.cli import lint_imports

    with tempfile.TemporaryDirectory() as tmp:
        assemble(pathlib.Path(tmp))
        sys.path.insert(0, tmp)  # ahead of the editable install's finder
        return lint_imports(config_filename=str(ROOT / "pyproject.toml"))


if __name__ == "__main__":
    sys.exit(main())
