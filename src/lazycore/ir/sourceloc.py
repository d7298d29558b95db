"""The user's source line: the innermost frame outside lazycore and the array libraries.

Fallbacks, recompile reasons and IR locations name the line of user code
responsible; frontends add their library's folder (or their one module's
file) with :func:`skip`.

:func:`caller` runs on every recorded op (``lazycore.apply``), so it is
cheap: whether a file is a library file is decided once per file name and
kept in a dict (one lookup per frame walked), and it returns the raw
``(code object, bytecode offset)``; the line number is looked up only when
someone asks (:func:`resolve`), at a compile or in a report.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys

from lazycore.ir import events
from lazycore.ir.memo import Memo

_SKIP: list[str] = []
_LIBRARY = Memo("ir.library_files", 4096)
"""File name -> True for a library file (skipped by the walk). Bounded: code
made at run time (``exec``, notebook cells) brings new file names."""


_SKIP_FILES: set[str] = set()


def skip(module, *, folder: bool = True) -> None:
    """Treat frames inside ``module``'s package folder as library frames, so
    locations name the user's line that called into it. ``folder=False``:
    only the frames of ``module``'s own file (a frontend written as one
    module, next to code of its users)."""
    path = os.path.abspath(module.__file__)
    if not folder:
        _SKIP_FILES.update((module.__file__, path))
        _LIBRARY.clear()
        return
    path = os.path.dirname(path) + os.sep
    if path not in _SKIP:
        _SKIP.append(path)
        _LIBRARY.clear()  # decided again against the new prefixes


INTERPOSERS = frozenset({"__torch_function__", "__torch_dispatch__", "__array_function__", "__array_ufunc__"})
"""Methods that pass an array op on (a user's torch mode or tensor subclass,
NumPy's protocols): never the op's line, which is their caller's. Taken for
one, every op under a mode had one line, so the scalar policy saw one place
whose number kept changing (Mask2Former under a mode drawing its random
points on the CPU: 40 "took 2.0 then 4.0" parameters and a compile at its
third step)."""


known_library = _LIBRARY.get
"""``known_library(filename)``: True or False where :func:`is_library` has
decided for ``filename`` already, else None (:func:`known_user_frame`, inline
on the per-op path)."""


def user_frame(f) -> bool:
    """Whether frame ``f`` is a user's: outside the libraries and not a method
    passing an op on (:data:`INTERPOSERS`)."""
    code = f.f_code
    return not is_library(code.co_filename) and code.co_name not in INTERPOSERS


def known_user_frame(f) -> bool:
    """Whether frame ``f`` is known to be a user's, decided without a walk: the
    per-op path asks it of the frame that called into a frontend, which is the
    user's own most often, and takes that frame's location, without a
    :func:`caller` call."""
    code = f.f_code
    return _LIBRARY.get(code.co_filename) is False and code.co_name not in INTERPOSERS


def is_library(filename: str) -> bool:
    """Whether frames of ``filename`` are library frames (see :func:`skip`)."""
    lib = _LIBRARY.get(filename)
    return _is_library(filename) if lib is None else lib


def _is_library(name: str) -> bool:
    lib = name in _SKIP_FILES or name.startswith(tuple(_SKIP)) or name.startswith("<frozen")
    return _LIBRARY.put(name, lib)


def caller(depth: int = 1, start=None, _getframe=sys._getframe, _get=_LIBRARY.get):
    """The raw location of the innermost user frame: ``(code, offset)``.

    The walk starts at ``sys._getframe(depth)`` as seen from here (1: the
    caller), or at ``start``. None if every frame is a library frame (an op
    recorded by a library thread, e.g. autograd's). :func:`resolve` turns
    the result into ``(file, line)``.

    ``start``: a frame that calls into the library (the frame a frontend's
    entry point was called from). Such a frame often calls many times from
    one place (autograd's engine runs a whole backward pass from one line,
    an optimizer loops over its parameters): while it is at the same
    instruction the answer is the same, and walking the frames again (each
    one made a Python object) cost more than the op's nodes. It is kept
    until another one is remembered or a barrier drops it (:func:`forget`).
    """
    remember = start is not None
    f = start if remember else _getframe(depth)
    if remember:
        last = _LAST
        if f is last[0] and f.f_lasti == last[1]:
            return last[2]
    start = f
    while f is not None:
        code = f.f_code
        lib = _get(code.co_filename)
        if not lib and (lib is not None or not _is_library(code.co_filename)) and code.co_name not in INTERPOSERS:
            found = (code, f.f_lasti)
            break
        f = f.f_back
    else:
        found = None
    # a generator's frame resumes under other callers; a user's frame is found at once
    if remember and f is not start and not start.f_code.co_flags & _SUSPENDS:
        _LAST[:] = (start, start.f_lasti, found)
    return found


_LAST: list = [None, -1, None]
"""The remembered start frame, its instruction offset, and the answer."""
_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def forget() -> None:
    """Drop the frame :func:`caller` remembered (so its locals are not kept alive)."""
    _LAST[:] = (None, -1, None)


def release(keep) -> None:
    """Drop the remembered frame unless it is ``keep``: a frontend's op that
    called back into itself (a decomposition's pieces) ends, and a frame of
    its own left remembered would keep the op's locals, its results among
    them, alive (autograd then copies a gradient it would have taken as it is,
    and the next barrier may see its outputs in another order)."""
    if _LAST[0] is not keep:
        _LAST[:] = (None, -1, None)


_LINES = Memo("ir.source_lines", 100_000)
"""Raw location -> ``(file, line)``."""


def resolve(loc) -> tuple[str, int] | None:
    """``(file, line)`` for a location from :func:`caller` (or already resolved)."""
    if loc is None or type(loc[0]) is str:
        return loc
    out = _LINES.get(loc)
    if out is None:
        code, offset = loc
        line = code.co_firstlineno
        for start, end, ln in code.co_lines():
            if start <= offset < end:
                if ln is not None:
                    line = ln
                break
        out = _LINES.put(loc, (code.co_filename, line))
    return out


def format_location(loc) -> str:
    """``file:line`` for a location (raw or resolved); ``<unknown>`` for None."""
    loc = resolve(loc)
    return "<unknown>" if loc is None else f"{loc[0]}:{loc[1]}"


def user_location(depth: int = 1) -> str:
    """``file:line`` of the innermost frame outside the skipped packages."""
    return format_location(caller(depth + 1))


skip(sys.modules["lazycore"])
# A ``with`` block's exit runs contextlib's frames between the library and the
# user's line; they are never the line a user wants.
_SKIP.append(contextlib.__file__)
# A barrier drops the remembered frame before it collects live tensors, so the
# frame's locals never add a program output.
events.listen("barrier_start", lambda device: forget())
