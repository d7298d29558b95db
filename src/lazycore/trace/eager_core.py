"""The eager debug mode (:mod:`lazycore.runtime.eager`) for the core API:
while it is on, ``lazycore.apply`` (``lazycore.trace.core.apply``, and the
facade's name for it) runs its results at once, and the loops and branches
(``lazycore.cond``, ``while_loop``, ``fori_loop``, ``scan``) run theirs when
they return (their bodies, traced inside, run nothing). Helpers built on
``apply`` (``broadcast_to``, ``convert_to``, ``check``) run each op they
make. A name bound before the mode was entered (``from lazycore import
apply``) stays lazy."""

from __future__ import annotations

import sys

from lazycore.ir import config
from lazycore.runtime import eager
from lazycore.trace import core

_CONTROL = ("cond", "while_loop", "fori_loop", "scan")


def _targets():
    from lazycore.trace import control  # (loaded when the mode is entered, not by importing the core)

    out = [(core, "apply")] + [(control, name) for name in _CONTROL]
    facade = sys.modules.get("lazycore")
    if facade is not None:
        for owner, name in list(out):
            # the facade caches what it handed out: give it the plain one
            # first, so leaving the mode puts that back
            if name not in vars(facade):
                setattr(facade, name, vars(owner)[name])
            out.append((facade, name))
    return out


SWAPS = eager.Swaps(_targets)
config.watch("eager", SWAPS)
