"""Every example the README shows writes nothing to stderr but lazycore's own
lines (issue 43's acceptance), each run in a child process as a user runs it.

tests/test_native_log_lines.py runs the python blocks of "One example per
capability"; this file runs the README's shell blocks (the quickstart's demo,
lazy-opt's example) and checks that no code block of the README is left out
of the two."""

import re
import subprocess
from pathlib import Path

from _bits import BY_HAND  # (tests/ is on the path)
from test_native_log_lines import _foreign_lines, _run
from test_readme import FENCE, README, section

ROOT = Path(__file__).parent.parent
CAPABILITIES = section("One example per capability", README)


def _blocks(text: str, kind: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(text) if m.group(1) == kind]


def test_every_readme_code_block_is_one_a_stderr_test_runs():
    kinds = [m.group(1) for m in FENCE.finditer(README)]
    # python: test_native_log_lines, all of them under the capabilities' heading; text (and
    # the demo's, unmarked): printed output; sh: the two below, by what they run
    assert set(kinds) == {"python", "text", "", "sh"}, kinds
    assert _blocks(README, "python") == _blocks(CAPABILITIES, "python")
    commands = [line for block in _blocks(README, "sh") for line in block.splitlines()
                if line.strip() and not line.startswith((" ", "}"))]
    runs = {"bash scripts/dev demo": test_the_demo_writes_only_lazycores_lines,
            "bash scripts/dev test": None,  # the test suite itself
            "echo 'func.func": test_the_lazy_opt_example_writes_nothing_to_stderr}
    for command in commands:
        assert any(command.startswith(prefix) for prefix in runs), f"README command not run by a test: {command}"


def test_the_lazy_opt_example_writes_nothing_to_stderr():
    (block,) = [b for b in _blocks(CAPABILITIES, "sh") if "lazy-opt" in b]
    run = subprocess.run(["bash", "-c", block], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0 and "stablehlo.negate" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stderr == ""


# CI: test_native_log_lines::test_the_readme_examples_write_no_native_log_lines (a child's stderr over the README's
# traced and captured torch training steps) and tests/torch/test_demo.py (the demo itself) take the same path
@BY_HAND
def test_the_demo_writes_only_lazycores_lines():
    """``bash scripts/dev demo`` runs examples/train_mlp.py once the environment is set up (a short run here)."""
    assert re.search(r'^\s*"\$VENV/bin/python" examples/train_mlp\.py "\$@"', (ROOT / "scripts" / "dev").read_text(), re.M)
    code = (f"import sys, runpy; sys.argv = ['train_mlp.py', '--steps', '30', '--every', '10']; "
            f"runpy.run_path({str(ROOT / 'examples' / 'train_mlp.py')!r}, run_name='__main__')")
    run = _run(code, "")
    assert run.returncode == 0 and "OK: lazy training matches eager" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    assert _foreign_lines(run.stderr) == [], run.stderr[-3000:]

