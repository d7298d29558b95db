"""The user's source line: the innermost frame outside lazycore and the array libraries.

Fallbacks (and later recompile reasons and IR locations) name the line of
user code responsible; frontends add their library's folder with :func:`skip`.
"""

from __future__ import annotations

import os
import sys

_SKIP: list[str] = []


def skip(module) -> None:
    """Treat frames inside ``module``'s package folder as library frames."""
    path = os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    if path not in _SKIP:
        _SKIP.append(path)


def user_location(depth: int = 1) -> str:
    """``file:line`` of the innermost frame outside the skipped packages."""
    prefixes = tuple(_SKIP)
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(prefixes) and not name.startswith("<frozen"):
            return f"{name}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


skip(sys.modules["lazycore"])
