"""docs/guides/float8.md's example prints what the guide shows (run here, in this process)."""

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "float8.md"


def test_the_float8_guides_example_prints_what_the_guide_shows():
    text = GUIDE.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", text, re.S).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "guide"})
    assert printed.getvalue() == shown
