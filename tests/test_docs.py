"""The documentation cannot go stale: the architecture picture names every module
of the runtime and trace layers, and every file and function it names exists;
the picture rendered is the picture's source."""

import html
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOT = (ROOT / "docs" / "architecture.dot").read_text()
LABEL = r'label="((?:[^"\\]|\\.)*)"'
LAYERS = {layer: ROOT / "src" / "lazycore" / layer for layer in ("ir", "trace", "runtime", "observe")}


def _named_files() -> list[tuple[str, str]]:
    """(folder, file) for each file the picture names; a bare name after a path
    (`runtime/barrier.py, stepplans.py`) is in that path's folder."""
    named = []
    for label in re.findall(LABEL, DOT):
        folder = None
        for token in re.findall(r"[\w/]+\.py", label.replace("\\n", " ")):
            if "/" in token:
                folder, _, name = token.rpartition("/")
            else:
                name = token
            named.append((folder or "", name))
    return named


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_the_picture_names_every_module_of_a_layer(layer):
    named = {name for folder, name in _named_files() if folder.endswith(layer)}
    modules = {p.name for p in LAYERS[layer].glob("*.py") if p.name != "__init__.py"}
    assert modules - named == set(), f"docs/architecture.dot leaves out {layer}/: {sorted(modules - named)}"


def test_every_file_the_picture_names_exists():
    roots = [ROOT / "src" / "lazycore", ROOT]
    missing = [f"{folder}/{name}" for folder, name in _named_files()
               if not any((r / folder / name).exists() for r in roots)]
    assert missing == []


def test_every_function_the_picture_names_exists():
    for module, attr in re.findall(r"\b(programs|compiler|cache|barrier)\.(?!py\b)(\w+)\b", DOT):
        mod = importlib.import_module(f"lazycore.runtime.{module}")
        assert hasattr(mod, attr), f"docs/architecture.dot names {module}.{attr}, which does not exist"


def test_the_svg_is_rendered_from_the_dot():
    """Each box of the source is in the picture (the svg holds the labels' lines as text)."""
    svg = re.sub(r"\s+", " ", html.unescape((ROOT / "docs" / "architecture.svg").read_text()))
    for label in re.findall(LABEL, DOT):
        first = re.sub(r"\s+", " ", label.split("\\n")[0].replace('\\"', '"')).strip()
        assert first in svg, f"docs/architecture.svg is older than its source: no {first!r}"


def test_the_performance_figures_are_the_results_file(tmp_path):
    """docs/performance.md's figures are scripts/perf_page.py's rendering of
    benchmarks/results.json (and results_*.json), never pasted by hand."""
    import subprocess
    import sys

    results = ROOT / "benchmarks" / "results.json"
    page = (ROOT / "docs" / "performance.md").read_text()
    figures = page.split("<!-- results:begin -->")[1].split("<!-- results:end -->")[0]
    if not results.exists():
        assert figures.strip() == "", "figures on the performance page without benchmarks/results.json"
        return
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "perf_page.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
