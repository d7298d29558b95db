"""One replayer: a key to the recordings that may serve it, each behind its guards.

Every memo-and-replay mechanism of lazycore has the same shape: a call is
reduced to a key (a lowering's signature, a step function's kinds of
arguments, an op under autocast with its arguments' types, a barrier's step
log), the key finds recordings made by earlier calls, and a recording
serves the call only if its guards hold (the inputs' aliasing, the Python
state a step read, optimizer state, the program still being cached). A
:class:`Replayer` is that shape, once: a bounded, registered memo
(:mod:`lazycore.ir.memo`) from key to a few recordings, newest last, and
:meth:`Replayer.replay`, which tries them newest first and makes the one
that served the newest. It sits in the graph
layer, below the runtime, so that the barrier's plans are kept by it too.

A recording is anything with ``attempt(*args)`` (:class:`Replayable`): the
call's result replayed, or :data:`GUARDED` when a guard fails, having
changed nothing. The users:

* recorded lowerings (:func:`lazycore.trace.recipes.replayed`:
  :meth:`~lazycore.trace.recipes.Recipe.attempt` checks the inputs' aliasing);
* captured steps (``lazycore.torch.capture``: a plan's guards are the
  Python state, modules, optimizers and gradients it recorded);
* optimizer replay (``frontends/torch/optim_replay.py``: a captured
  function per optimizer, whose recordings are a captured step's);
* autocast plans (``frontends/torch/autocast.py``: run as is, replay the
  casts, or refuse, decided once per call signature);
* step plans (:mod:`lazycore.runtime.stepplans`: a barrier's walk recalled
  by its step log's encoding, or by its wiring at other padded sizes;
  guarded by its program still being cached, the inputs' marks and
  donation);
* bucket plans (:mod:`lazycore.runtime.buckets`: how a walk's program at
  bucket sizes is called, guarded by that program still being cached).
"""

from __future__ import annotations

from typing import Protocol

from lazycore.ir.memo import Family, Memo

GUARDED = object()
"""What :meth:`Replayable.attempt` returns when a guard failed (None may be a result)."""


class Replayable(Protocol):
    def attempt(self, *args):
        """The call's result, replayed on ``args``; :data:`GUARDED`, with
        nothing changed, when the recording does not hold for them."""


class Replayer(Memo):
    """Key -> the recordings kept for it (at most ``per_key``, newest last),
    at most ``limit`` keys (emptied whole at the bound, as a memo is)."""

    __slots__ = ("per_key",)

    def __init__(self, name: str, limit: int, per_key: int = 1, family: Family | None = None):
        super().__init__(name, limit, family)
        self.per_key = per_key

    def replay(self, key, *args):
        """The newest of ``key``'s recordings whose guards hold, replayed on
        ``args``; the one that served becomes the newest. :data:`GUARDED`
        when none does (or none was kept).

        Newest first because consecutive calls mostly pass the guards of the
        recording the last one used (a generate() call's tokens, a training
        run between evaluations), and a recording tried first whose guards
        fail costs a whole check (transformers' model holds the cache length
        of its last generate() call: each token of a call of another length
        failed the other length's recording first). With one recording per
        key (recorded lowerings, autocast, step and bucket plans) the order
        is moot."""
        kept = self.get(key)
        if not kept:
            return GUARDED
        last = len(kept) - 1
        for k in range(last, -1, -1):
            out = kept[k].attempt(*args)
            if out is not GUARDED:
                if k != last:
                    self[key] = kept[:k] + kept[k + 1:] + (kept[k],)
                return out
        return GUARDED

    def find(self, key):
        """``key``'s newest recording, or None (for recordings without guards of their own)."""
        kept = self.get(key)
        return kept[-1] if kept else None

    def add(self, key, recording):
        """Keep ``recording`` for ``key``, dropping that key's oldest one
        when it has ``per_key`` already; returns ``recording``."""
        kept = self.get(key, ())
        if len(kept) >= self.per_key:
            kept = kept[len(kept) - self.per_key + 1:]
        self.put(key, kept + (recording,))
        return recording

    def put(self, key, value):
        if key not in self and len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
