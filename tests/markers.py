"""Lines of a test file found by a marker comment (``# <marker>`` at a line's
end), so tests about reported source lines hard-code no line numbers."""

import os


def markers(test_file: str):
    """``(path, line_of, at)`` for ``test_file``: its absolute path, the line
    number of a marker (exactly one line must carry it) and ``path:line``."""
    path = os.path.abspath(test_file)

    def line_of(marker: str) -> int:
        with open(path) as f:
            hits = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
        assert len(hits) == 1, (marker, hits)
        return hits[0]

    def at(marker: str) -> str:
        return f"{path}:{line_of(marker)}"

    return path, line_of, at
