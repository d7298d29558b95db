"""The README's walkthroughs run as written and print what it shows.

In the sections named here, every ```python block runs, in order, in one
namespace per section; a ```text block right after one is its expected
output (``...`` stands for any text: a version, a byte count)."""

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
PAGES = {p: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def section(title: str, text: str | None = None) -> str:
    """The text under a heading (in the README or a page of docs/), up to the
    next heading of its level or above."""
    for page in [text] if text is not None else PAGES.values():
        m = re.search(rf"^(#+) {re.escape(title)}\n", page, re.M)
        if m:
            break
    assert m, f"no section '{title}' in README.md or docs/"
    level = len(m.group(1))
    rest = page[m.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def steps(text: str) -> list[tuple[str, str | None]]:
    """(code, expected output or None) per python block."""
    out = []
    for m in FENCE.finditer(text):
        kind, body = m.group(1), m.group(2)
        if kind == "python":
            out.append([body, None])
        elif kind == "text" and out and out[-1][1] is None:
            out[-1][1] = body
    return [tuple(s) for s in out]


def matches(expected: str, got: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got, re.S) is not None


@pytest.mark.parametrize("title", ["Walkthrough: a fused lowering", "Walkthrough: a frontend in 25 lines",
                                   "Exporting StableHLO: `lazycore.export`", "Loops and branches in the graph",
                                   "Shape buckets: `dynamic`", "What lazycore does that others don't"])
def test_walkthrough_runs_and_prints_what_the_readme_shows(title, restore_lowerings):
    blocks = steps(section(title))
    assert blocks and any(expected is not None for _, expected in blocks)
    namespace: dict = {"__name__": f"readme_{len(title)}"}
    for i, (code, expected) in enumerate(blocks):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"README.md ({title}, block {i})", "exec"), namespace)
        if expected is not None:
            assert matches(expected, printed.getvalue()), (
                f"block {i} of '{title}' printed\n{printed.getvalue()}\nthe README shows\n{expected}"
            )


def test_the_readme_examples_run_and_print_what_it_shows(restore_lowerings):
    """One namespace for the README's capability examples, in order, as a reader runs them."""
    blocks = steps(section("One example per capability", README))
    assert len(blocks) >= 8 and all(expected is not None for _, expected in blocks)
    namespace: dict = {"__name__": "readme_examples"}
    for i, (code, expected) in enumerate(blocks):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"README.md (example {i})", "exec"), namespace)
        assert matches(expected, printed.getvalue()), (
            f"README example {i} printed\n{printed.getvalue()}\nthe README shows\n{expected}")


def test_the_readme_stays_short_and_its_links_resolve():
    assert len(README.splitlines()) <= 300
    for target in re.findall(r"\]\(([^)#:]+)\)", README):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_the_fused_lowering_shown_is_the_example_file():
    code = steps(section("Walkthrough: a fused lowering"))[1][0]
    example = (ROOT / "examples" / "softplus_lowering.py").read_text()
    assert example.endswith(code) and code.startswith("import numpy as np\n")
