"""Seeing what happens: metrics and the report, guards, ``LAZYCORE_DEBUG``
lines, profiles, IR dumps and graph pictures, FileCheck captures. Each module
listens to :mod:`lazycore.ir.events`; importing this package wires them all
(the ``lazycore`` facade and the frontends do)."""

from lazycore.observe import debug, guards, inspect_graph, metrics, nans, profile  # noqa: F401
