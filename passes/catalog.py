"""Passes by pipeline name: the registry :func:`register_pass` fills.

A pass module registers its factory here when imported; the pipeline
(:mod:`lazycore.passes.pipeline`) reads the registry and loads the built-in
passes before its first lookup. Passes and plugins import only this module,
so no pass depends on the pipeline that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


class PassError(RuntimeError):
    """A pass refused its input or its options.

    ``location`` is the ``ir.Location`` of what was refused (a function, an
    op) where there is one, so that ``lazy-opt`` can print ``file:line:col``.
    """

    def __init__(self, message: str, location=None):
        super().__init__(message)
        self.location = location


@dataclass(frozen=True)
class PassInfo:
    name: str
    summary: str
    factory: Callable[..., Callable]
    """``factory(**options)`` -> ``run(module_op)``; raises PassError."""
    options: dict[str, str] = field(default_factory=dict)
    """Option name -> help text."""


PASSES: dict[str, PassInfo] = {}


def register_pass(name: str, summary: str, options: dict[str, str] | None = None):
    """Decorator registering a pass factory under a pipeline name."""

    def wrap(factory):
        if name in PASSES:
            raise ValueError(f"pass '{name}' is already registered")
        PASSES[name] = PassInfo(name, summary, factory, dict(options or {}))
        return factory

    return wrap
