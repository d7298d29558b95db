"""The eager debug mode (:mod:`lazycore.runtime.eager`) for the core API:
while it is on, ``lazycore.apply`` (``lazycore.trace.core.apply``, and the
facade's name for it) runs its results at once, and the loops and branches
(``lazycore.cond``, ``while_loop``, ``fori_loop``, ``scan``) run theirs when
they return (their bodies, traced inside, run nothing). Helpers built on
``apply`` (``broadcast_to``, ``convert_to``, ``check``) run each op they
make. A name bound before the mode was entered (``from lazycore import
apply``) stays lazy.

Each core API module hands its own entry points to :func:`install` when it
is imported (:mod:`.core` its ``apply``, :mod:`.control` its loops), so this
module knows none of them and the mode reaches a module loaded while it is on."""

from __future__ import annotations

import sys

from lazycore.ir import config
from lazycore.runtime import eager


def install(owner, names: tuple[str, ...]) -> eager.Swaps:
    """Wrap ``owner``'s ``names`` (and the facade's same names) with
    :func:`lazycore.runtime.eager.op` whenever the mode is on; now, if it is."""

    def targets():
        out = [(owner, name) for name in names]
        facade = sys.modules.get("lazycore")
        if facade is not None:
            for name in names:
                # the facade caches what it handed out: give it the plain one
                # first, so leaving the mode puts that back
                if name not in vars(facade):
                    setattr(facade, name, vars(owner)[name])
                out.append((facade, name))
        return out

    swaps = eager.Swaps(targets)
    config.watch("eager", swaps)
    return swaps
