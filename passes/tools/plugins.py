"""``lazy-opt --load-python-module``: mlir-opt's ``--load-pass-plugin``, in Python.

A plugin is a Python file or an importable module that registers passes
(:func:`lazycore.passes.register_pass`) or lowerings
(:func:`lazycore.passes.register_lowering`, ``load_pdl_patterns``) when it is
imported. Its passes are then pipeline elements and ``--PASS`` flags like the
built-in ones. A plugin that fails to load is reported at its line.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from contextlib import contextmanager

from lazycore.passes import PASSES
from lazycore.passes.lowering import registry

from .diagnostics import Diagnostic

FLAG = "--load-python-module"

_imported: set[str] = set()
"""Plugins imported by module name (private to :func:`load`)."""


class PluginError(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def requested(argv: list[str]) -> list[str]:
    """The plugins named on the command line, in order (``--flag X`` or ``--flag=X``).

    They load before the command line is parsed, so their passes are flags."""
    out = []
    for i, arg in enumerate(argv):
        if arg == FLAG and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith(FLAG + "="):
            out.append(arg[len(FLAG) + 1 :])
    return out


def _failure(error: BaseException, path: str | None, what: str) -> PluginError:
    """The error at the plugin's line that raised it (or at the line the
    error names: a syntax error, an import inside the plugin that failed)."""
    if isinstance(error, SyntaxError) and error.filename:
        where = (error.filename, error.lineno or 1, error.offset or 1)
        return PluginError(Diagnostic("error", where, f"loading {what}: {error.msg}"))
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if path is not None and os.path.abspath(f.filename) == path]
    frame = (own or frames or [None])[-1]
    where = (frame.filename, frame.lineno, (frame.colno or 0) + 1) if frame is not None else None
    return PluginError(Diagnostic("error", where, f"loading {what} raised {type(error).__name__}: {error}"))


def load(name: str) -> None:
    """Import a plugin by path (``x.py``, ``dir/x.py``) or module name (``pkg.mod``).

    A module this function imported before is imported again: its
    registrations are what loading it means, and :func:`scoped_registrations`
    dropped them at the end of the run that loaded it.
    """
    if name.endswith(".py") or os.sep in name:
        path = os.path.abspath(name)
        if not os.path.isfile(path):
            raise PluginError(Diagnostic("error", None, f"{FLAG}: no such file '{name}'"))
        module_name = "lazy_opt_plugin_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look it up
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            sys.modules.pop(module_name, None)
            raise _failure(e, path, name) from None
        return
    try:
        if name in _imported and name in sys.modules:
            importlib.reload(sys.modules[name])
        else:
            importlib.import_module(name)
            _imported.add(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.startswith(e.name):
            raise PluginError(Diagnostic("error", None, f"{FLAG}: no module named '{name}'")) from None
        raise _failure(e, _file_of(name), name) from None
    except Exception as e:
        raise _failure(e, _file_of(name), name) from None


def _file_of(module_name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    return os.path.abspath(spec.origin) if spec is not None and spec.origin else None


@contextmanager
def scoped_registrations():
    """Passes, lowerings and PDL patterns registered inside the block are
    dropped at its end: ``lazy_opt.main`` called in a process (tests) leaves
    the process's registries as it found them."""
    passes, user, pdl = dict(PASSES), dict(registry.USER), list(registry.PDL_SOURCES)
    try:
        yield
    finally:
        PASSES.clear()
        PASSES.update(passes)
        registry.USER.clear()
        registry.USER.update(user)
        registry.PDL_SOURCES[:] = pdl
