"""The one replayer, as the trace layer and the frontends reach it.

The mechanism is :mod:`lazycore.ir.replayer` (its page lists every user):
it sits in the graph layer so that the runtime's step and bucket plans are
kept and recalled by the same memo type as recorded lowerings, captured
steps, optimizer replay and autocast plans.
"""

from lazycore.ir.replayer import GUARDED, Replayable, Replayer

__all__ = ["GUARDED", "Replayable", "Replayer"]
